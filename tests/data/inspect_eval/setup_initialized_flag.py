"""Hierarchical all-reduce: intra-node-pair groups built once, then NCCL in each stage."""
import torch
import torch.distributed as dist

_initialized = False
_pair_group = None
_cross_group = None


def _init_groups():
    global _initialized, _pair_group, _cross_group
    if not _initialized:
        world, rank = dist.get_world_size(), dist.get_rank()
        for base in range(0, world, 2):
            g = dist.new_group([base, base + 1])  # expect: nccl_metadata setup
            if rank in (base, base + 1):
                _pair_group = g
        for parity in range(2):
            g = dist.new_group(list(range(parity, world, 2)))  # expect: nccl_metadata setup
            if rank % 2 == parity:
                _cross_group = g
        dist.barrier()  # expect: nccl_metadata setup
        _initialized = True


@torch.no_grad()
def solution(x: torch.Tensor) -> torch.Tensor:
    _init_groups()
    y = x.clone()
    half = y.view(2, -1)
    idx = dist.get_rank() % 2
    dist.reduce_scatter_tensor(half[idx], y.view(-1), group=_pair_group)  # expect: nccl_payload hot
    dist.all_reduce(half[idx], group=_cross_group)  # expect: nccl_payload hot
    dist.all_gather_into_tensor(y.view(-1), half[idx].contiguous(), group=_pair_group)  # expect: nccl_payload hot
    return y
