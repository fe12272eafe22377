from typing import List

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_SYM = {}


def _sym(x):
    if x.shape not in _SYM:
        b = symm_mem.empty(x.shape, dtype=x.dtype, device=x.device)  # expect: rendezvous unknown
        _SYM[x.shape] = (b, symm_mem.rendezvous(b, dist.group.WORLD))  # expect: rendezvous unknown
    return _SYM[x.shape]


def solution(x: torch.Tensor, op: str) -> torch.Tensor:
    """Reduce-scatter with a selectable reduction ("sum" uses peer pulls, others use NCCL)."""
    world, rank = dist.get_world_size(), dist.get_rank()
    rows = x.shape[0] // world
    out = torch.empty(rows, *x.shape[1:], dtype=x.dtype, device=x.device)
    if op == "sum":
        buf, hdl = _sym(x)
        buf.copy_(x)
        dist.barrier()  # expect: nccl_metadata unknown
        stage = torch.empty(world, rows, *x.shape[1:], dtype=x.dtype, device=x.device)
        for p in range(world):
            stage[p].copy_(hdl.get_buffer(p, x.shape, x.dtype)[rank * rows:(rank + 1) * rows])  # expect: copy_engine unknown
        out.copy_(stage.float().sum(0))
    else:
        red = {"max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN, "avg": dist.ReduceOp.AVG}[op]
        inputs: List[torch.Tensor] = list(x.split(rows))
        dist.reduce_scatter(out, inputs, op=red)  # expect: nccl_payload unknown
    dist.barrier()  # expect: nccl_metadata hot
    return out
