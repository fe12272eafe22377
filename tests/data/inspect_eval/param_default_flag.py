"""Symmetric-memory broadcast; the keyword-only switch to NCCL is off by default."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_bufs = {}


def _root_buffer(x):
    key = (x.shape, x.dtype)
    if key not in _bufs:
        b = symm_mem.empty(x.shape, dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        _bufs[key] = (b, symm_mem.rendezvous(b, dist.group.WORLD))  # expect: rendezvous setup
    return _bufs[key]


def solution(x: torch.Tensor, src: int = 0, *, use_nccl: bool = False) -> torch.Tensor:
    if use_nccl:
        y = x.clone()
        dist.broadcast(y, src=src)  # expect: nccl_payload fallback
        return y
    buf, hdl = _root_buffer(x)
    if hdl.rank == src:
        buf.copy_(x)
    dist.barrier()  # expect: nccl_metadata hot
    out = torch.empty_like(x)
    out.copy_(hdl.get_buffer(src, x.shape, x.dtype))  # expect: copy_engine hot
    dist.barrier()  # expect: nccl_metadata hot
    return out
