"""Symmetric-memory all-reduce where all remote traffic happens inside SM arithmetic, not copies."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_S = {}


def _get(x):
    if x.shape not in _S:
        b = symm_mem.empty(x.shape, dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        _S[x.shape] = (b, symm_mem.rendezvous(b, dist.group.WORLD))  # expect: rendezvous setup
    return _S[x.shape]


def solution(x: torch.Tensor) -> torch.Tensor:
    buf, hdl = _get(x)
    buf.copy_(x)
    mine = hdl.get_buffer(hdl.rank, x.shape, x.dtype)
    dist.barrier()  # expect: nccl_metadata hot
    acc = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
    acc.copy_(mine)
    for p in range(hdl.world_size):
        if p == hdl.rank:
            continue
        acc.add_(hdl.get_buffer(p, x.shape, x.dtype))
    dist.barrier()  # expect: nccl_metadata hot
    out = torch.empty_like(x)
    out.copy_(acc)
    return out
