import ctypes

import torch
import torch.distributed as dist

_libcudart = None
_peer = None  # list of remote device pointers, opened once
_local = None


class _IpcHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]


def solution(x: torch.Tensor) -> torch.Tensor:
    """Ring shift: rank r receives rank r-1's tensor, pulled with cudaMemcpyAsync over UVA."""
    global _libcudart, _peer, _local
    rank, world = dist.get_rank(), dist.get_world_size()
    if _peer is None:
        _libcudart = ctypes.CDLL("libcudart.so")
        _local = torch.empty_like(x)
        h = _IpcHandle()
        _libcudart.cudaIpcGetMemHandle(ctypes.byref(h), ctypes.c_void_p(_local.data_ptr()))  # expect: rendezvous setup
        table = [None] * world
        dist.all_gather_object(table, h.reserved)  # expect: nccl_metadata setup
        src_h = _IpcHandle(table[(rank - 1) % world])
        ptr = ctypes.c_void_p()
        _libcudart.cudaIpcOpenMemHandle(ctypes.byref(ptr), src_h, ctypes.c_uint(1))  # expect: rendezvous setup
        _peer = ptr.value
    _local.copy_(x)
    torch.cuda.current_stream().synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    out = torch.empty_like(x)
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    _libcudart.cudaMemcpyAsync(ctypes.c_void_p(out.data_ptr()), ctypes.c_void_p(_peer),  # expect: copy_engine hot
                               ctypes.c_size_t(x.nbytes), ctypes.c_int(3), stream)
    _libcudart.cudaStreamSynchronize(stream)
    dist.barrier()  # expect: nccl_metadata hot
    return out
