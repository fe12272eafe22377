"""All-gather over CUDA IPC using only ctypes into libcudart: handles are exchanged
once, every call pulls the peer shards with cudaMemcpyAsync(cudaMemcpyDefault)."""
import ctypes

import torch
import torch.distributed as dist

_rt = ctypes.CDLL("libcudart.so")
_rt.cudaMemcpyAsync.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
_cudaMemcpyDefault = 4
_cudaIpcMemLazyEnablePeerAccess = 1


class cudaIpcMemHandle_t(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]


_peer = {}


def _exchange(x: torch.Tensor):
    key = (x.numel(), x.dtype)
    if key not in _peer:
        staging = torch.empty_like(x)
        h = cudaIpcMemHandle_t()
        assert _rt.cudaIpcGetMemHandle(ctypes.byref(h), ctypes.c_void_p(staging.data_ptr())) == 0  # expect: rendezvous setup
        raw = [None] * dist.get_world_size()
        dist.all_gather_object(raw, h.reserved.raw)  # expect: nccl_metadata setup
        ptrs = []
        for r, blob in enumerate(raw):
            if r == dist.get_rank():
                ptrs.append(staging.data_ptr())
                continue
            p = ctypes.c_void_p()
            rc = _rt.cudaIpcOpenMemHandle(ctypes.byref(p), cudaIpcMemHandle_t(blob), _cudaIpcMemLazyEnablePeerAccess)  # expect: rendezvous setup
            if rc != 0:
                raise RuntimeError(f"cudaIpcOpenMemHandle failed ({rc})")
            ptrs.append(p.value)
        _peer[key] = (staging, ptrs)
    return _peer[key]


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    x = tensor.contiguous()
    out = x.new_empty((world * x.shape[0], *x.shape[1:]))
    try:
        staging, ptrs = _exchange(x)
        staging.copy_(x)
        torch.cuda.synchronize()
        dist.barrier()  # expect: nccl_metadata hot
        nbytes = x.numel() * x.element_size()
        s = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        for r, p in enumerate(ptrs):
            if _rt.cudaMemcpyAsync(out.data_ptr() + r * nbytes, p, nbytes, _cudaMemcpyDefault, s) != 0:  # expect: copy_engine hot
                raise RuntimeError("cudaMemcpyAsync failed")
        torch.cuda.synchronize()
        dist.barrier()  # expect: nccl_metadata hot
    except RuntimeError:
        dist.monitored_barrier()  # expect: nccl_metadata fallback
        parts = list(out.chunk(world, dim=0))
        dist.all_gather(parts, x)  # expect: nccl_payload fallback
    return out
