"""Crashes on rank 1 at its first call (as a kernel with a bad address would)."""

import torch
import torch.distributed as dist


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    if dist.get_rank() == 1:
        raise RuntimeError("tiny kernel: illegal memory access")
    out = tensor.clone()
    dist.all_reduce(out, op=dist.ReduceOp.SUM)
    return out * 0.5 + 1.0
