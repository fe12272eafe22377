"""Correct: gathers every rank's tensor and sums them, then the same elementwise op."""

import torch
import torch.distributed as dist


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    parts = [torch.empty_like(tensor) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, tensor)
    return torch.stack(parts).sum(dim=0) * 0.5 + 1.0
