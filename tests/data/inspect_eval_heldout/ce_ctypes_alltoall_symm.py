"""All-to-all with the copy engines: rank r pulls chunk r of every peer's symmetric
buffer with cudaMemcpyPeerAsync called through ctypes."""
import ctypes
import functools

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_cudart = ctypes.CDLL("libcudart.so")
_cudart.cudaMemcpyPeerAsync.argtypes = [
    ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p,
]
_cudart.cudaMemcpyPeerAsync.restype = ctypes.c_int


@functools.lru_cache(maxsize=None)
def _symm(numel: int, dtype: torch.dtype):
    buf = symm_mem.empty(numel, dtype=dtype, device="cuda")  # expect: rendezvous setup
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD.group_name)  # expect: rendezvous setup
    return buf, hdl


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    rank, world = dist.get_rank(), dist.get_world_size()
    x = tensor.contiguous()
    buf, hdl = _symm(x.numel(), x.dtype)
    buf.copy_(x.view(-1))
    hdl.barrier(channel=0)

    out = torch.empty_like(x)
    out_flat = out.view(-1)
    chunk = x.numel() // world
    nbytes = chunk * x.element_size()
    dev = torch.cuda.current_device()
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    for step in range(world):
        peer = (rank + step) % world
        dst = out_flat[peer * chunk:(peer + 1) * chunk]
        if peer == rank:
            dst.copy_(buf[rank * chunk:(rank + 1) * chunk])
            continue
        src = hdl.buffer_ptrs[peer] + rank * nbytes
        err = _cudart.cudaMemcpyPeerAsync(ctypes.c_void_p(dst.data_ptr()), dev,  # expect: copy_engine hot
                                          ctypes.c_void_p(src), peer, nbytes, stream)
        if err != 0:
            raise RuntimeError(f"cudaMemcpyPeerAsync failed with error {err}")
    hdl.barrier(channel=1)
    return out
