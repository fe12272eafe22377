"""2-D convolution with the image split along its height: each rank swaps one-row
halos with its neighbours (blocking send/recv, ordered by rank parity so the
exchange cannot deadlock), then runs a local 3x3 convolution."""
import torch
import torch.distributed as dist
import torch.nn.functional as F


def _exchange(top: torch.Tensor, bottom: torch.Tensor, rank: int, world: int):
    from_up = torch.zeros_like(top)
    from_down = torch.zeros_like(bottom)
    up, down = rank - 1, rank + 1
    if rank % 2 == 0:
        if down < world:
            dist.send(bottom, dst=down)  # expect: nccl_payload hot
            dist.recv(from_down, src=down)  # expect: nccl_payload hot
        if up >= 0:
            dist.send(top, dst=up)  # expect: nccl_payload hot
            dist.recv(from_up, src=up)  # expect: nccl_payload hot
    else:
        if up >= 0:
            dist.recv(from_up, src=up)  # expect: nccl_payload hot
            dist.send(top, dst=up)  # expect: nccl_payload hot
        if down < world:
            dist.recv(from_down, src=down)  # expect: nccl_payload hot
            dist.send(bottom, dst=down)  # expect: nccl_payload hot
    return from_up, from_down


def solution(image: torch.Tensor, kernel: torch.Tensor) -> torch.Tensor:
    world, rank = dist.get_world_size(), dist.get_rank()
    k = kernel[:3, :3].float().reshape(1, 1, 3, 3)
    img = image.float()
    if world == 1:
        halo_up = torch.zeros_like(img[:1])
        halo_down = torch.zeros_like(img[-1:])
    else:
        halo_up, halo_down = _exchange(img[:1].contiguous(), img[-1:].contiguous(), rank, world)
    padded = torch.cat([halo_up, img, halo_down], dim=0)[None, None]
    out = F.conv2d(padded, k, padding=(0, 1))
    return out[0, 0].to(image.dtype)
