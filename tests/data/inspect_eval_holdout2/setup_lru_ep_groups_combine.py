"""MoE token combine over an expert-parallel sub-group (EP=4 inside a world of 8):
expert outputs return to their source ranks with all_to_all_single. The EP groups
are created once."""
import functools
from typing import Optional

import torch
import torch.distributed as dist


@functools.lru_cache(maxsize=4)
def _ep_groups(ep_size: int):
    world, rank = dist.get_world_size(), dist.get_rank()
    mine = None
    for start in range(0, world, ep_size):
        ranks = list(range(start, start + ep_size))
        g = dist.new_group(ranks=ranks)  # expect: nccl_metadata setup
        if rank in ranks:
            mine = g
    return mine


def _splits_from_routing(routing: torch.Tensor, ep_size: int):
    dest = routing.float().argmax(dim=-1) % ep_size
    return torch.bincount(dest, minlength=ep_size), torch.argsort(dest, stable=True)


def solution(
    expert_out: torch.Tensor,
    routing: torch.Tensor,
    ep_size: int = 4,
    group: Optional[dist.ProcessGroup] = None,
) -> torch.Tensor:
    if ep_size == 1:
        return expert_out.clone()
    group = group if group is not None else _ep_groups(ep_size)
    in_splits, order = _splits_from_routing(routing, ep_size)
    out_splits = torch.empty_like(in_splits)
    dist.all_to_all_single(out_splits, in_splits, group=group)  # expect: nccl_metadata hot
    send = expert_out[order].contiguous()
    recv = expert_out.new_empty((int(out_splits.sum()), expert_out.shape[1]))
    dist.all_to_all_single(  # expect: nccl_payload hot
        recv,
        send,
        output_split_sizes=out_splits.tolist(),
        input_split_sizes=in_splits.tolist(),
        group=group,
    )
    return recv
