"""Ring-free all-gather: every rank pushes its shard into every peer's buffer (ctypes + libcudart)."""
import ctypes

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_rt = ctypes.CDLL("libcudart.so")
_rt.cudaMemcpyPeerAsync.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int,
                                    ctypes.c_size_t, ctypes.c_void_p]
_symm = {}


def _gather_buffer(shape, dtype, device, world):
    key = (tuple(shape), dtype)
    if key not in _symm:
        buf = symm_mem.empty((world,) + tuple(shape), dtype=dtype, device=device)  # expect: rendezvous setup
        _symm[key] = (buf, symm_mem.rendezvous(buf, dist.group.WORLD))  # expect: rendezvous setup
    return _symm[key]


def solution(x: torch.Tensor) -> torch.Tensor:
    world, rank = dist.get_world_size(), dist.get_rank()
    if x.data_ptr() % 16 != 0 or not x.is_contiguous():
        out = torch.empty((world * x.shape[0],) + tuple(x.shape[1:]), dtype=x.dtype, device=x.device)
        dist.all_gather_into_tensor(out, x.contiguous())  # expect: nccl_payload fallback
        return out
    buf, hdl = _gather_buffer(x.shape, x.dtype, x.device, world)
    nbytes = x.numel() * x.element_size()
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    dist.barrier()  # expect: nccl_metadata hot
    for peer in range(world):
        dst = hdl.buffer_ptrs[peer] + rank * nbytes
        rc = _rt.cudaMemcpyPeerAsync(dst, peer, x.data_ptr(), rank, nbytes, stream)  # expect: copy_engine hot
        if rc != 0:
            raise RuntimeError(f"cudaMemcpyPeerAsync failed: {rc}")
    torch.cuda.current_stream().synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    return buf.reshape(world * x.shape[0], *x.shape[1:]).clone()
