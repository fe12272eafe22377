"""Distributed 2-D FFT with a slab decomposition: FFT along rows, global transpose
with all_to_all_single, FFT along the new rows, and a final transpose."""
import functools

import torch
import torch.distributed as dist


def _pack(x: torch.Tensor, world: int) -> torch.Tensor:
    rows, cols = x.shape
    return x.reshape(rows, world, cols // world).transpose(0, 1).contiguous()


def _transpose(x: torch.Tensor, group, world: int) -> torch.Tensor:
    # [rows_local, cols] complex -> [cols_local, rows_global] complex
    send = torch.view_as_real(_pack(x, world))
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=group)  # expect: nccl_payload hot
    recv = torch.view_as_complex(recv)  # [world, rows_local, cols_local]
    return recv.permute(2, 0, 1).reshape(x.shape[1] // world, -1).contiguous()


def _transpose_via_gather(x: torch.Tensor, group, world: int) -> torch.Tensor:
    parts = [torch.empty_like(x) for _ in range(world)]
    dist.all_gather(parts, x.contiguous(), group=group)  # expect: nccl_payload fallback
    full = torch.cat(parts, dim=0)
    rank = dist.get_rank(group)
    cols = x.shape[1] // world
    return full[:, rank * cols:(rank + 1) * cols].t().contiguous()


def solution(x: torch.Tensor, group=None, inverse: bool = False) -> torch.Tensor:
    group = group if group is not None else dist.group.WORLD
    world = dist.get_world_size(group)
    fft = torch.fft.ifft if inverse else torch.fft.fft
    if world == 1:
        return torch.view_as_real(torch.fft.fft2(x.float())).to(x.dtype)
    if x.shape[1] % world != 0:
        raise ValueError("the column count must be divisible by the world size")
    transpose = functools.partial(_transpose, group=group, world=world)
    y = fft(x.to(torch.complex64), dim=1)
    yt = fft(transpose(y), dim=1)
    return torch.view_as_real(transpose(yt)).to(x.dtype)
