import functools

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem


@functools.cache
def _symm_pair(shape, dtype, device):
    send = symm_mem.empty(shape, dtype=dtype, device=device)  # expect: rendezvous setup
    send_h = symm_mem.rendezvous(send, dist.group.WORLD.group_name)  # expect: rendezvous setup
    return send, send_h


@torch.no_grad()
def solution(x: torch.Tensor) -> torch.Tensor:
    """All-to-all: pull block `rank` of every peer's send buffer."""
    send, h = _symm_pair(tuple(x.shape), x.dtype, x.device)
    world, rank = h.world_size, h.rank
    rows = x.shape[0] // world
    send.copy_(x)
    dist.barrier()  # expect: nccl_metadata hot
    out = torch.empty_like(x)
    for src in range(world):
        peer_view = h.get_buffer(src, x.shape, x.dtype)
        out[src * rows:(src + 1) * rows].copy_(peer_view[rank * rows:(rank + 1) * rows])  # expect: copy_engine hot
    dist.barrier()  # expect: nccl_metadata hot
    return out
