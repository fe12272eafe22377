"""Gradient-norm clipping with expert parallelism. Dense gradients are replicated
across the whole world, expert gradients only within an EP group, so the two
squared norms are reduced over different groups before being combined."""
from typing import List

import torch
import torch.distributed as dist

_EP_SIZE = 4
_groups = None


def _ep_groups():
    global _groups
    if _groups is None:
        world, rank = dist.get_world_size(), dist.get_rank()
        ep_group = dp_group = None
        for start in range(0, world, _EP_SIZE):
            ranks = list(range(start, start + _EP_SIZE))
            g = dist.new_group(ranks=ranks)  # expect: nccl_metadata setup
            if rank in ranks:
                ep_group = g
        for offset in range(_EP_SIZE):
            ranks = list(range(offset, world, _EP_SIZE))
            g = dist.new_group(ranks=ranks)  # expect: nccl_metadata setup
            if rank in ranks:
                dp_group = g
        _groups = (ep_group, dp_group)
    return _groups


def _sq_norm(ts: List[torch.Tensor]) -> torch.Tensor:
    if not ts:
        return torch.zeros((), dtype=torch.float32, device="cuda")
    return torch.stack(torch._foreach_norm([t.float() for t in ts])).square().sum()


@torch.no_grad()
def solution(dense_grads: List[torch.Tensor], expert_grads: List[torch.Tensor],
             max_norm: float = 1.0) -> torch.Tensor:
    ep_group, dp_group = _ep_groups()
    dense_sq = _sq_norm(dense_grads) / dist.get_world_size()
    dist.all_reduce(dense_sq)  # expect: nccl_metadata hot
    expert_sq = _sq_norm(expert_grads)
    dist.all_reduce(expert_sq, group=ep_group)  # expect: nccl_metadata hot
    expert_sq = expert_sq / dist.get_world_size(dp_group)
    dist.all_reduce(expert_sq, group=dp_group)  # expect: nccl_metadata hot
    total = (dense_sq + expert_sq).sqrt()
    coef = (max_norm / (total + 1e-6)).clamp(max=1.0)
    for ts in (dense_grads, expert_grads):
        if ts:
            torch._foreach_mul_(ts, coef.to(ts[0].dtype))
    return total
