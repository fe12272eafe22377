import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_bufs = {}


def _buffers(x):
    k = (x.shape, x.dtype)
    if k not in _bufs:
        b = symm_mem.empty(x.shape, dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        h = symm_mem.rendezvous(b, dist.group.WORLD)  # expect: rendezvous setup
        _bufs[k] = (b, h)
    return _bufs[k]


def solution(x: torch.Tensor) -> torch.Tensor:
    """All-to-all: rank r pushes row block p into peer p's buffer at slot r."""
    if os.environ.get("USE_NCCL") == "1":
        out = torch.empty_like(x)
        dist.all_to_all_single(out, x.contiguous())  # expect: nccl_payload fallback
        return out
    buf, hdl = _buffers(x)
    w, r = hdl.world_size, hdl.rank
    rows = x.shape[0] // w
    dist.barrier()  # expect: nccl_metadata hot
    for p in range(w):
        dst = buf if p == r else hdl.get_buffer(p, x.shape, x.dtype)
        torch.Tensor.copy_(dst[r * rows:(r + 1) * rows], x[p * rows:(p + 1) * rows])  # expect: copy_engine hot
    torch.cuda.synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    return buf.clone()
