"""Distributed sample sort with regular sampling. Returns this rank's bucket of the
globally sorted sequence (bucket r holds keys between splitters r-1 and r)."""
from typing import List

import torch
import torch.distributed as dist


def _gather_sizes(n: int, device: torch.device, world: int) -> List[int]:
    size = torch.tensor([n], dtype=torch.int64, device=device)
    sizes = torch.empty(world, dtype=torch.int64, device=device)
    dist.all_gather_into_tensor(sizes, size)  # expect: nccl_metadata hot
    return sizes.tolist()


@torch.no_grad()
def solution(x: torch.Tensor) -> torch.Tensor:
    rank, world = dist.get_rank(), dist.get_world_size()
    dev = x.device
    local = torch.sort(x.reshape(-1).float()).values
    sizes = _gather_sizes(local.numel(), dev, world)
    # regular sampling needs W-1 distinct positions; tiny shards sample with repetition
    if min(sizes) >= world:
        pos = (torch.arange(1, world, device=dev) * local.numel()) // world
    else:
        pos = torch.arange(world - 1, device=dev) % max(local.numel(), 1)
    samples = local[pos]
    all_samples = torch.empty(world * (world - 1), dtype=samples.dtype, device=dev)
    dist.all_gather_into_tensor(all_samples, samples)  # expect: nccl_payload hot
    ordered = torch.sort(all_samples).values
    splitters = ordered[(world - 1) * torch.arange(1, world, device=dev) - 1]

    dest = torch.bucketize(local, splitters, right=True)
    send_counts = torch.bincount(dest, minlength=world)
    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts)  # expect: nccl_metadata hot
    recv = torch.empty(int(recv_counts.sum()), dtype=local.dtype, device=dev)
    dist.all_to_all_single(recv, local, output_split_sizes=recv_counts.tolist(),  # expect: nccl_payload hot
                           input_split_sizes=send_counts.tolist())
    return torch.sort(recv).values.to(x.dtype)
