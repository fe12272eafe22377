import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

MAX_CUSTOM_BYTES = 8 * 1024 * 1024
_symm = {}


def _get(x):
    if x.shape not in _symm:
        b = symm_mem.empty(x.shape, dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        _symm[x.shape] = (b, symm_mem.rendezvous(b, dist.group.WORLD))  # expect: rendezvous setup
    return _symm[x.shape]


def solution(x: torch.Tensor) -> torch.Tensor:
    """Broadcast from rank 0. Messages up to 8 MiB: non-root ranks pull root's buffer with copy_()."""
    if x.nbytes > MAX_CUSTOM_BYTES:
        y = x.clone()
        dist.broadcast(y, src=0)  # expect: nccl_payload fallback
        return y
    buf, hdl = _get(x)
    if hdl.rank == 0:
        buf.copy_(x)
    dist.barrier()  # expect: nccl_metadata hot
    out = torch.empty_like(x)
    if hdl.rank == 0:
        out.copy_(x)
    else:
        root = hdl.get_buffer(0, x.shape, x.dtype)
        out.copy_(root)  # expect: copy_engine hot
    dist.barrier()  # expect: nccl_metadata hot
    return out
