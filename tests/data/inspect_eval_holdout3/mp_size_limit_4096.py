import torch
import torch.distributed as dist

SLOTS_PER_RANK = 512


def solution(x: torch.Tensor) -> torch.Tensor:
    rank = dist.get_rank()
    world = dist.get_world_size()
    dev = x.device

    # 2*W running statistics
    stats = torch.full((2 * world,), 0.0, device=dev)
    stats[rank] = x.float().mean()
    stats[world + rank] = x.float().var()
    dist.all_reduce(stats)  # expect: nccl_metadata hot

    # 512 slots per rank: 4096 elements at W=8, still within the bound
    slots = torch.zeros(world * SLOTS_PER_RANK, dtype=torch.int32, device=dev)
    slots[rank * SLOTS_PER_RANK : (rank + 1) * SLOTS_PER_RANK] = 1
    dist.all_reduce(slots)  # expect: nccl_metadata hot

    # 1024 slots per rank: 8192 elements at W=8, over the bound
    bigslots = torch.zeros(world * 2 * SLOTS_PER_RANK, dtype=torch.int32, device=dev)
    bigslots[rank] = 1
    dist.all_reduce(bigslots)  # expect: nccl_payload hot

    mean = stats[:world].mean()
    std = stats[world:].mean().sqrt()
    z = (x.float() - mean) / (std + 1e-5)
    return (z + 0 * slots.sum() + 0 * bigslots.sum()).to(x.dtype)
