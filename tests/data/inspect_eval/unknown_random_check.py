import random

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

CHECK_RATE = 0.01
_state = {}


def solution(x: torch.Tensor) -> torch.Tensor:
    """All-to-all with symmetric-memory pushes; occasionally cross-checked against NCCL."""
    if not _state:
        buf = symm_mem.empty(x.shape, dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        _state["buf"], _state["hdl"] = buf, symm_mem.rendezvous(buf, dist.group.WORLD)  # expect: rendezvous setup
    buf, hdl = _state["buf"], _state["hdl"]
    w, r = hdl.world_size, hdl.rank
    blk = x.shape[0] // w
    dist.barrier()  # expect: nccl_metadata hot
    for p in range(w):
        target = hdl.get_buffer(p, x.shape, x.dtype)
        target[r * blk:(r + 1) * blk].copy_(x[p * blk:(p + 1) * blk])  # expect: copy_engine hot
    torch.cuda.synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    out = buf.clone()
    if random.random() < CHECK_RATE:
        ref = torch.empty_like(x)
        dist.all_to_all_single(ref, x)  # expect: nccl_payload unknown
        assert torch.equal(ref, out), "symmetric-memory all-to-all mismatch"
    return out
