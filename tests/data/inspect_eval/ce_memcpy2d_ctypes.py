import ctypes

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_rt = ctypes.CDLL("libcudart.so")
_rt.cudaMemcpy2DAsync.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t,
                                  ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
_DEV2DEV = 3
_SYM = {}


def _sym(shape, dtype, device):
    k = (tuple(shape), dtype)
    if k not in _SYM:
        t = symm_mem.empty(shape, dtype=dtype, device=device)  # expect: rendezvous setup
        _SYM[k] = (t, symm_mem.rendezvous(t, dist.group.WORLD))  # expect: rendezvous setup
    return _SYM[k]


def solution(x: torch.Tensor) -> torch.Tensor:
    """All-gather along columns: rank r's tile lands at column block r of every peer's output."""
    world, rank = dist.get_world_size(), dist.get_rank()
    rows, cols = x.shape
    t, hdl = _sym((rows, cols * world), x.dtype, x.device)
    esz = x.element_size()
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    dist.barrier()  # expect: nccl_metadata hot
    for peer in range(world):
        dst = hdl.buffer_ptrs[peer] + rank * cols * esz
        _rt.cudaMemcpy2DAsync(dst, cols * world * esz, x.data_ptr(), cols * esz, cols * esz, rows,  # expect: copy_engine hot
                              _DEV2DEV, stream)
    torch.cuda.current_stream().synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    return t.clone()
