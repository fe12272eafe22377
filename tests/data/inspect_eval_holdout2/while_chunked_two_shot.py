"""Chunked two-shot all-reduce over symmetric memory. For each chunk, slice p is
pushed to its owner p (copy engine), the owner reduces it, and the reduced slice
is pushed back to every rank. Chunks are walked with a while loop."""
import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_CHUNK = int(os.environ.get("AR_CHUNK_ELEMS", str(1 << 18)))
_S = {"hdl": None}


def _scratch(world: int, chunk: int, dtype, device):
    if _S["hdl"] is None:
        _S["buf"] = symm_mem.empty((2, world, chunk // world), dtype=dtype, device=device)  # expect: rendezvous setup
        _S["hdl"] = symm_mem.rendezvous(_S["buf"], dist.group.WORLD.group_name)  # expect: rendezvous setup
    return _S["buf"], _S["hdl"]


def solution(tensor: torch.Tensor) -> torch.Tensor:
    world, rank = dist.get_world_size(), dist.get_rank()
    flat = tensor.reshape(-1)
    n = flat.numel()
    if n % _CHUNK != 0 or _CHUNK % world != 0:
        out = tensor.clone()
        dist.all_reduce(out)  # expect: nccl_payload fallback
        return out
    buf, hdl = _scratch(world, _CHUNK, tensor.dtype, tensor.device)
    out = torch.empty_like(flat)
    part = _CHUNK // world
    off = 0
    while off < n:
        chunk = flat[off:off + _CHUNK].view(world, part)
        hdl.barrier(channel=0)
        for p in range(world):
            remote = hdl.get_buffer(p, buf.shape, buf.dtype)
            remote[0, rank].copy_(chunk[p])  # expect: copy_engine hot
        hdl.barrier(channel=1)
        red = buf[0].float().sum(0).to(tensor.dtype)
        for p in range(world):
            remote = hdl.get_buffer(p, buf.shape, buf.dtype)
            remote[1, rank].copy_(red)  # expect: copy_engine hot
        hdl.barrier(channel=2)
        out[off:off + _CHUNK].copy_(buf[1].reshape(-1))
        off += _CHUNK
    return out.view_as(tensor)
