"""Multimem all-reduce needs sm_90 NVLS; older GPUs use NCCL."""
import functools

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem


@functools.lru_cache(maxsize=None)
def _mc_buffer(numel, dtype, dev):
    t = symm_mem.empty(numel, dtype=dtype, device=dev)  # expect: rendezvous setup
    symm_mem.rendezvous(t, dist.group.WORLD.group_name)  # expect: rendezvous setup
    return t


def solution(x: torch.Tensor) -> torch.Tensor:
    major, minor = torch.cuda.get_device_capability(x.device)
    if (major, minor) < (9, 0):
        out = x.clone()
        dist.all_reduce(out)  # expect: nccl_payload fallback
        return out
    buf = _mc_buffer(x.numel(), x.dtype, x.device)
    buf.copy_(x.view(-1))
    torch.ops.symm_mem.multimem_all_reduce_(buf, "sum", dist.group.WORLD.group_name)
    return buf.view_as(x).clone()
