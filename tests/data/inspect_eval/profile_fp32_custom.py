# profile: dtype=float32
"""Push-based all-to-all through symmetric memory for fp32 only."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_CUSTOM_DTYPES = {torch.float32}
_ws = None


def _workspace(x):
    global _ws
    if _ws is None:
        buf = symm_mem.empty(x.shape, dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        _ws = (buf, symm_mem.rendezvous(buf, dist.group.WORLD))  # expect: rendezvous setup
    return _ws


def solution(x: torch.Tensor) -> torch.Tensor:
    if x.dtype not in _CUSTOM_DTYPES:
        out = torch.empty_like(x)
        dist.all_to_all_single(out, x)  # expect: nccl_payload fallback
        return out

    buf, hdl = _workspace(x)
    world, rank = hdl.world_size, hdl.rank
    rows = x.shape[0] // world
    dist.barrier()  # expect: nccl_metadata hot
    for peer in range(world):
        chunk = x[peer * rows:(peer + 1) * rows]
        if peer == rank:
            buf[rank * rows:(rank + 1) * rows].copy_(chunk)
            continue
        remote = hdl.get_buffer(peer, x.shape, x.dtype)
        remote[rank * rows:(rank + 1) * rows].copy_(chunk)  # expect: copy_engine hot
    torch.cuda.synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    return buf.clone()
