"""Variable-length all-gather along dim 0 (Ulysses variable primitive). Lengths are
exchanged as Python objects, every rank pads to the longest shard, the padded shards
are gathered with the functional op and trimmed."""
from typing import List

import torch
import torch.distributed as dist


def _lengths(n: int, world: int) -> List[int]:
    lens = [None] * world
    dist.all_gather_object(lens, n)  # expect: nccl_metadata hot
    return lens


@torch.no_grad()
def solution(local: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    group_name = dist.group.WORLD.group_name
    lens = _lengths(local.shape[0], world)
    longest = max(lens)
    if local.shape[0] < longest:
        pad = local.new_zeros((longest - local.shape[0], *local.shape[1:]))
        padded = torch.cat([local, pad], dim=0)
    else:
        padded = local.contiguous()
    gathered = torch.ops._c10d_functional.all_gather_into_tensor(padded, world, group_name)  # expect: nccl_payload hot
    gathered = torch.ops._c10d_functional.wait_tensor(gathered)
    chunks = gathered.view(world, longest, *local.shape[1:])
    return torch.cat([chunks[r, :lens[r]] for r in range(world)], dim=0)
