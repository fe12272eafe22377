"""Uses PyTorch's built-in symmetric-memory all-reduce; only the rendezvous is ours."""
import functools

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem


@functools.lru_cache(maxsize=None)
def _buffer(numel: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    t = symm_mem.empty(numel, dtype=dtype, device=device)  # expect: rendezvous setup
    symm_mem.rendezvous(t, group=dist.group.WORLD.group_name)  # expect: rendezvous setup
    return t


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    group_name = dist.group.WORLD.group_name
    buf = _buffer(tensor.numel(), tensor.dtype, tensor.device)
    buf.copy_(tensor.reshape(-1))
    torch.ops.symm_mem.two_shot_all_reduce_(buf, "sum", group_name)
    out = torch.empty_like(tensor)
    out.view(-1).copy_(buf)
    return out
