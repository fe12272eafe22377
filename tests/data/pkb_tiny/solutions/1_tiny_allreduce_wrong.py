"""Wrong on the last rank only: it keeps its own tensor instead of the reduced one."""

import torch
import torch.distributed as dist


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    out = tensor.clone()
    dist.all_reduce(out, op=dist.ReduceOp.SUM)
    if dist.get_rank() == dist.get_world_size() - 1:
        out = tensor.clone()
    return out * 0.5 + 1.0
