"""All-reduce with the symmetric-memory ops shipped in PyTorch: one-shot for small
messages (latency bound), two-shot in place for larger ones, NCCL above the size of
the preallocated workspace."""
import functools

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_ONE_SHOT_MAX_BYTES = 256 * 1024
_WORKSPACE_MAX_BYTES = 64 << 20


@functools.lru_cache(maxsize=4)
def _small_ws(numel: int, dtype: torch.dtype):
    buf = symm_mem.empty(numel, dtype=dtype, device="cuda")  # expect: rendezvous fallback
    symm_mem.rendezvous(buf, dist.group.WORLD.group_name)  # expect: rendezvous fallback
    return buf


@functools.lru_cache(maxsize=4)
def _large_ws(numel: int, dtype: torch.dtype):
    buf = symm_mem.empty(numel, dtype=dtype, device="cuda")  # expect: rendezvous setup
    symm_mem.rendezvous(buf, dist.group.WORLD.group_name)  # expect: rendezvous setup
    return buf


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    group_name = dist.group.WORLD.group_name
    nbytes = tensor.numel() * tensor.element_size()
    if nbytes > _WORKSPACE_MAX_BYTES:
        out = tensor.clone()
        dist.all_reduce(out)  # expect: nccl_payload fallback
        return out
    if nbytes <= _ONE_SHOT_MAX_BYTES:
        buf = _small_ws(tensor.numel(), tensor.dtype)
        buf.copy_(tensor.view(-1))
        return torch.ops.symm_mem.one_shot_all_reduce(buf, "sum", group_name).view_as(tensor)
    buf = _large_ws(tensor.numel(), tensor.dtype)
    buf.copy_(tensor.view(-1))
    torch.ops.symm_mem.two_shot_all_reduce_(buf, "sum", group_name)
    return buf.view_as(tensor).clone()
