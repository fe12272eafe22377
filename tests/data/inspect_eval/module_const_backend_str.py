"""Configurable backend; the shipped configuration keeps NCCL."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

BACKEND = "nccl"  # "symm" enables the experimental symmetric-memory path
_symm_cache = {}


def _symm_reduce_scatter(x):
    k = x.shape
    if k not in _symm_cache:
        t = symm_mem.empty(x.shape, dtype=x.dtype, device=x.device)  # expect: rendezvous fallback
        _symm_cache[k] = (t, symm_mem.rendezvous(t, dist.group.WORLD))  # expect: rendezvous fallback
    t, h = _symm_cache[k]
    t.copy_(x)
    dist.barrier()  # expect: nccl_metadata fallback
    rows = x.shape[0] // h.world_size
    acc = torch.zeros(rows, *x.shape[1:], dtype=torch.float32, device=x.device)
    for p in range(h.world_size):
        acc += h.get_buffer(p, x.shape, x.dtype)[h.rank * rows:(h.rank + 1) * rows]
    dist.barrier()  # expect: nccl_metadata fallback
    return acc.to(x.dtype)


def solution(x: torch.Tensor) -> torch.Tensor:
    if BACKEND == "nccl":
        out = torch.empty(x.shape[0] // dist.get_world_size(), *x.shape[1:], dtype=x.dtype, device=x.device)
        dist.reduce_scatter_tensor(out, x)  # expect: nccl_payload hot
        return out
    return _symm_reduce_scatter(x)
