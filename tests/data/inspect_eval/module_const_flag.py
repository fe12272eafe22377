import ctypes

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

USE_CUSTOM = True
_lib = ctypes.CDLL("libcudart.so")
cudaMemcpyDeviceToDevice = 3
_state = None


def _nccl(x):
    out = torch.empty_like(x)
    dist.all_to_all_single(out, x)  # expect: nccl_payload fallback
    return out


def solution(x: torch.Tensor) -> torch.Tensor:
    global _state
    if not USE_CUSTOM:
        return _nccl(x)
    if _state is None:
        buf = symm_mem.empty(x.shape, dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        _state = (buf, symm_mem.rendezvous(buf, dist.group.WORLD))  # expect: rendezvous setup
    buf, hdl = _state
    me, world = hdl.rank, hdl.world_size
    chunk = x.nbytes // world
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    dist.barrier()  # expect: nccl_metadata hot
    for j in range(1, world + 1):
        peer = (me + j) % world
        dst = ctypes.c_void_p(hdl.buffer_ptrs[peer] + me * chunk)
        src = ctypes.c_void_p(x.data_ptr() + peer * chunk)
        _lib.cudaMemcpyAsync(dst, src, ctypes.c_size_t(chunk), cudaMemcpyDeviceToDevice, stream)  # expect: copy_engine hot
    _lib.cudaStreamSynchronize(stream)
    dist.barrier()  # expect: nccl_metadata hot
    return buf.clone()
