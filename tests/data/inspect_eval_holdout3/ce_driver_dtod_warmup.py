import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from cuda import cuda

_READY = False
_BUF = None
_HDL = None
_PREV = None


def _init(x: torch.Tensor):
    global _READY, _BUF, _HDL, _PREV
    rank = dist.get_rank()
    world = dist.get_world_size()
    _BUF = symm_mem.empty(x.shape, dtype=x.dtype, device=x.device)  # expect: rendezvous setup
    _HDL = symm_mem.rendezvous(_BUF, dist.group.WORLD.group_name)  # expect: rendezvous setup
    _BUF.zero_()
    _HDL.barrier()
    # warm the peer mapping once with a tiny pull
    _PREV = torch.empty(16, dtype=x.dtype, device=x.device)
    stream = torch.cuda.current_stream().cuda_stream
    cuda.cuMemcpyDtoDAsync(_PREV.data_ptr(), _HDL.buffer_ptrs[(rank + 1) % world], 16 * x.element_size(), stream)  # expect: copy_engine setup
    torch.cuda.current_stream().synchronize()
    _READY = True


def solution(x: torch.Tensor) -> torch.Tensor:
    if not _READY:
        _init(x)
    rank = dist.get_rank()
    world = dist.get_world_size()
    stream = torch.cuda.current_stream().cuda_stream
    nbytes = x.numel() * x.element_size()
    cuda.cuMemcpyDtoDAsync(_BUF.data_ptr(), x.data_ptr(), nbytes, stream)
    _HDL.barrier()
    # halo exchange of the first and last rows with both neighbours
    row = x.shape[1] * x.element_size()
    top = torch.empty((1, x.shape[1]), dtype=x.dtype, device=x.device)
    bottom = torch.empty_like(top)
    up, down = (rank - 1) % world, (rank + 1) % world
    cuda.cuMemcpyDtoDAsync(top.data_ptr(), _HDL.buffer_ptrs[up] + nbytes - row, row, stream)  # expect: copy_engine hot
    cuda.cuMemcpyDtoDAsync(bottom.data_ptr(), _HDL.buffer_ptrs[down], row, stream)  # expect: copy_engine hot
    _HDL.barrier()
    padded = torch.cat([top, x, bottom], dim=0).float()
    out = (padded[:-2] + padded[1:-1] + padded[2:]) / 3
    return out.to(x.dtype)
