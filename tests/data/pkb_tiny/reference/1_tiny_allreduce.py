"""A tiny problem in PKB's layout: all-reduce (sum) of a small tensor, then out * 0.5 + 1."""

import torch
import torch.distributed as dist


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    out = tensor.clone()
    dist.all_reduce(out, op=dist.ReduceOp.SUM)
    return out * 0.5 + 1.0
