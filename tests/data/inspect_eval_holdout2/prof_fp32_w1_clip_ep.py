# profile: dtype=float32 world_size=1
"""clip_grad_norm_ with expert parallelism: dense gradients reduce over the whole
world, expert gradients additionally over their EP group."""
import functools

import torch
import torch.distributed as dist


@functools.cache
def _ep_group(world: int, ep_size: int):
    rank = dist.get_rank()
    mine = None
    for start in range(0, world, ep_size):
        ranks = list(range(start, start + ep_size))
        g = dist.new_group(ranks)  # expect: nccl_metadata fallback
        if rank in ranks:
            mine = g
    return mine


def _sumsq(t: torch.Tensor) -> torch.Tensor:
    if t.dtype == torch.float32:
        return torch.linalg.vector_norm(t, 2).pow(2)
    return torch.linalg.vector_norm(t.float(), 2).pow(2)


def solution(
    dense_grad: torch.Tensor,
    expert_grad: torch.Tensor,
    max_norm: float = 1.0,
    ep_size: int = 1,
) -> torch.Tensor:
    world = dist.get_world_size()
    dense = _sumsq(dense_grad).reshape(1)
    expert = _sumsq(expert_grad).reshape(1)
    if world > 1:
        dist.all_reduce(dense)  # expect: nccl_metadata fallback
        if ep_size > 1:
            dist.all_reduce(expert, group=_ep_group(world, ep_size))  # expect: nccl_metadata fallback
        dist.all_reduce(expert)  # expect: nccl_metadata fallback
    total = (dense + expert).sqrt()
    coef = (max_norm / (total + 1e-6)).clamp(max=1.0)
    dense_grad.mul_(coef.to(dense_grad.dtype))
    expert_grad.mul_(coef.to(expert_grad.dtype))
    return total[0]
