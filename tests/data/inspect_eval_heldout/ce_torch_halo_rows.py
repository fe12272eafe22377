"""1-D halo exchange along rows followed by a 3-point stencil.

The neighbours' boundary rows are read straight out of their symmetric buffers with
torch copies (peer-to-peer over NVLink); the edges of the global domain stay zero."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

HALO = 1
_cache = {}


def _get(shape, dtype, device):
    key = (tuple(shape), dtype)
    hit = _cache.get(key)
    if hit is not None:
        return hit
    buf = symm_mem.empty(shape, dtype=dtype, device=device)  # expect: rendezvous setup
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD.group_name)  # expect: rendezvous setup
    _cache[key] = (buf, hdl)
    return buf, hdl


@torch.no_grad()
def solution(x: torch.Tensor) -> torch.Tensor:
    rank, world = dist.get_rank(), dist.get_world_size()
    rows, cols = x.shape
    buf, hdl = _get(x.shape, x.dtype, x.device)
    buf.copy_(x)
    hdl.barrier(channel=0)

    padded = torch.zeros(rows + 2 * HALO, cols, dtype=x.dtype, device=x.device)
    padded[HALO:HALO + rows].copy_(buf)
    if rank > 0:
        above = hdl.get_buffer(rank - 1, (rows, cols), x.dtype)
        padded[:HALO].copy_(above[rows - HALO:])  # expect: copy_engine hot
    if rank < world - 1:
        below = hdl.get_buffer(rank + 1, (rows, cols), x.dtype)
        padded[HALO + rows:] = below[:HALO]  # expect: copy_engine hot
    hdl.barrier(channel=1)

    p = padded.float()
    out = 0.25 * p[:-2] + 0.5 * p[1:-1] + 0.25 * p[2:]
    return out.to(x.dtype)
