"""All-gather by pulling every rank's symmetric buffer with torch copies (NVLink
peer reads). PKB_FORCE_NCCL=1 switches to NCCL for A/B runs, AG_DEBUG adds a sync."""
import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_DEBUG_SYNC = os.getenv("AG_DEBUG") is not None


def _buffers(t: torch.Tensor):
    if not hasattr(_buffers, "state") or _buffers.state[0].shape != t.shape:
        buf = symm_mem.empty(t.shape, dtype=t.dtype, device=t.device)  # expect: rendezvous setup
        hdl = symm_mem.rendezvous(buf, dist.group.WORLD.group_name)  # expect: rendezvous setup
        _buffers.state = (buf, hdl)
    return _buffers.state


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    rows = tensor.shape[0]
    out = torch.empty((world * rows, *tensor.shape[1:]), dtype=tensor.dtype, device=tensor.device)
    if os.environ.get("PKB_FORCE_NCCL", "0") == "1":
        dist.all_gather_into_tensor(out, tensor.contiguous())  # expect: nccl_payload fallback
        return out

    buf, hdl = _buffers(tensor)
    buf.copy_(tensor)
    hdl.barrier(channel=0)
    for r in range(world):
        src = hdl.get_buffer(r, tensor.shape, tensor.dtype)
        out[r * rows:(r + 1) * rows].copy_(src)  # expect: copy_engine hot
    if _DEBUG_SYNC:
        torch.cuda.synchronize()
        dist.barrier()  # expect: nccl_metadata fallback
    hdl.barrier(channel=1)
    return out
