# profile: dtype=bfloat16 world_size=4
import torch
import torch.distributed as dist

SLOTS = 1024


def solution(x: torch.Tensor) -> torch.Tensor:
    rank = dist.get_rank()
    world = dist.get_world_size()
    if world <= 2:
        dist.all_reduce(x)  # expect: nccl_payload fallback
        return x

    # W * 1024 = 4096 slots at W=4: within the bound
    occupancy = torch.zeros(world * SLOTS, dtype=torch.int32, device=x.device)
    occupancy[rank * SLOTS : (rank + 1) * SLOTS] = (x[:, 0] != 0).int()[:SLOTS]
    dist.all_reduce(occupancy)  # expect: nccl_metadata hot

    # W * 2048 = 8192 at W=4: over the bound
    wide = torch.zeros(world * 2 * SLOTS, dtype=torch.int32, device=x.device)
    wide[rank] = 1
    dist.all_reduce(wide)  # expect: nccl_payload hot

    # reduce-scatter of the activations
    out = torch.empty((x.shape[0] // world, x.shape[1]), dtype=x.dtype, device=x.device)
    dist.reduce_scatter_tensor(out, x.contiguous())  # expect: nccl_payload hot
    frac = occupancy.float().mean() + 0.0 * wide.float().sum()
    return out * frac.to(x.dtype)
