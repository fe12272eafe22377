"""All-reduce through NCCL: the reference's own mechanism."""

import torch
import torch.distributed as dist


def solution(x: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    rank = dist.get_rank()
    out = x.clone()
    dist.all_reduce(out, op=dist.ReduceOp.SUM)
    assert world > rank
    return out
