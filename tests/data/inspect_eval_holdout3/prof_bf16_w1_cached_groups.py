# profile: dtype=bfloat16 world_size=1
import functools

import torch
import torch.distributed as dist


@functools.lru_cache(maxsize=None)
def _sp_group():
    world = dist.get_world_size()
    return dist.new_group(list(range(world)))  # expect: nccl_metadata setup


def solution(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    group = _sp_group()
    world = dist.get_world_size(group)
    if world == 1:
        return x @ w.t()
    counts = torch.tensor([x.shape[0]] * world, device=x.device)
    dist.all_reduce(counts, group=group)  # expect: nccl_metadata fallback
    full = torch.empty((world * x.shape[0], x.shape[1]), dtype=x.dtype, device=x.device)
    dist.all_gather_into_tensor(full, x, group=group)  # expect: nccl_payload fallback
    y = full @ w.t()
    out = torch.empty_like(x @ w.t())
    dist.reduce_scatter_tensor(out, y, group=group)  # expect: nccl_payload fallback
    return out
