"""Ulysses all-to-all primitive: split along scatter_dim, concatenate along
gather_dim. The common 2-D case (scatter dim 1, gather dim 0) is pushed into every
peer's symmetric buffer; other dimension pairs use NCCL all_to_all after checking
that every rank agrees on the shape."""
from typing import Optional

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_SYM = {}


def _sym(shape, dtype, device):
    key = (shape, dtype)
    if key not in _SYM:
        b = symm_mem.empty(shape, dtype=dtype, device=device)  # expect: rendezvous unknown
        _SYM[key] = (b, symm_mem.rendezvous(b, dist.group.WORLD.group_name))  # expect: rendezvous unknown
    return _SYM[key]


def _push(x: torch.Tensor, world: int, rank: int) -> torch.Tensor:
    cols = x.shape[1] // world
    buf, hdl = _sym((world, x.shape[0], cols), x.dtype, x.device)
    hdl.barrier(channel=0)
    for p in range(world):
        hdl.get_buffer(p, buf.shape, buf.dtype)[rank].copy_(x[:, p * cols:(p + 1) * cols])  # expect: copy_engine unknown
    hdl.barrier(channel=1)
    return buf.reshape(world * x.shape[0], cols).clone()


def _nccl(x: torch.Tensor, scatter_dim: int, gather_dim: int, world: int, group) -> torch.Tensor:
    ins = [t.contiguous() for t in torch.tensor_split(x, world, scatter_dim)]
    outs = [torch.empty_like(t) for t in ins]
    dist.all_to_all(outs, ins, group=group)  # expect: nccl_payload unknown
    return torch.cat(outs, dim=gather_dim)


def solution(
    x: torch.Tensor,
    scatter_dim: int,
    gather_dim: int,
    group: Optional[dist.ProcessGroup] = None,
) -> torch.Tensor:
    group = group or dist.group.WORLD
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    if x.dim() == 2 and scatter_dim == 1 and gather_dim == 0:
        out = _push(x, world, rank)
    else:
        shapes = [None] * world
        dist.all_gather_object(shapes, tuple(x.shape), group=group)  # expect: nccl_metadata unknown
        if len(set(shapes)) != 1:
            raise ValueError(f"ranks disagree on the input shape: {shapes}")
        out = _nccl(x, scatter_dim, gather_dim, world, group)
    return out
