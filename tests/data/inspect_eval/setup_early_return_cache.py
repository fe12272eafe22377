import cupy as cp
import torch
import torch.distributed as dist

_cache = {}


def _peer_table(buf):
    key = (buf.data_ptr(), buf.numel())
    if key in _cache:
        return _cache[key]
    rank, world = dist.get_rank(), dist.get_world_size()
    handle = cp.cuda.runtime.ipcGetMemHandle(buf.data_ptr())  # expect: rendezvous setup
    gathered = [None] * world
    dist.all_gather_object(gathered, handle)  # expect: nccl_metadata setup
    table = [buf.data_ptr() if r == rank else cp.cuda.runtime.ipcOpenMemHandle(h)  # expect: rendezvous setup
             for r, h in enumerate(gathered)]
    _cache[key] = table
    return table


_inbox = {}


def solution(x: torch.Tensor) -> torch.Tensor:
    """Reduce to rank 0: rank 0 pulls each peer's tensor with memcpyAsync, then sums locally."""
    rank, world = dist.get_rank(), dist.get_world_size()
    buf = _inbox.setdefault(x.shape, torch.empty_like(x))
    table = _peer_table(buf)
    buf.copy_(x)
    torch.cuda.synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    out = x.clone()
    if rank == 0:
        tmp = torch.empty((world - 1,) + tuple(x.shape), dtype=x.dtype, device=x.device)
        for i, r in enumerate(range(1, world)):
            cp.cuda.runtime.memcpyAsync(tmp[i].data_ptr(), table[r], x.nbytes, cp.cuda.runtime.memcpyDeviceToDevice, 0)  # expect: copy_engine hot
        torch.cuda.synchronize()
        out += tmp.sum(0)
    dist.barrier()  # expect: nccl_metadata hot
    return out
