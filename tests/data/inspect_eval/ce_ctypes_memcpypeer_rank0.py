"""Gather to rank 0 with blocking cudaMemcpyPeer through ctypes."""
import ctypes
import ctypes.util

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_cudart = ctypes.CDLL(ctypes.util.find_library("cudart") or "libcudart.so")
_cudart.cudaMemcpyPeer.restype = ctypes.c_int
_H = {}


def _handle(x, world):
    if "h" not in _H:
        b = symm_mem.empty((world, *x.shape), dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        _H["b"], _H["h"] = b, symm_mem.rendezvous(b, dist.group.WORLD)  # expect: rendezvous setup
    return _H["b"], _H["h"]


def solution(x: torch.Tensor) -> torch.Tensor:
    world, rank = dist.get_world_size(), dist.get_rank()
    buf, hdl = _handle(x, world)
    buf[rank].copy_(x)
    torch.cuda.synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    out = torch.empty((world * x.shape[0],) + tuple(x.shape[1:]), dtype=x.dtype, device=x.device)
    if rank == 0:
        for src in range(world):
            dst = ctypes.c_void_p(out.data_ptr() + src * x.nbytes)
            remote = ctypes.c_void_p(hdl.buffer_ptrs[src] + src * x.nbytes)
            rc = _cudart.cudaMemcpyPeer(dst, ctypes.c_int(0), remote, ctypes.c_int(src), ctypes.c_size_t(x.nbytes))  # expect: copy_engine hot
            assert rc == 0, f"cudaMemcpyPeer returned {rc}"
    dist.barrier()  # expect: nccl_metadata hot
    return out
