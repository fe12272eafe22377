"""All-to-all via the driver API: cuMemcpyDtoDAsync straight into peers' symmetric buffers."""
from cuda.bindings import driver as cu
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_RECV = {}


def _recv_buffer(x):
    k = (x.shape, x.dtype)
    if k not in _RECV:
        buf = symm_mem.empty(x.shape, dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        hdl = symm_mem.rendezvous(buf, dist.group.WORLD)  # expect: rendezvous setup
        _RECV[k] = (buf, hdl, [cu.CUdeviceptr(p) for p in hdl.buffer_ptrs])
    return _RECV[k]


def _ok(res):
    if res[0] != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(str(res[0]))


def solution(x: torch.Tensor) -> torch.Tensor:
    buf, hdl, remote = _recv_buffer(x)
    me, world = hdl.rank, hdl.world_size
    chunk = x.nbytes // world
    stream = cu.CUstream(torch.cuda.current_stream().cuda_stream)
    dist.barrier()  # expect: nccl_metadata hot
    for off in range(world):
        peer = (me + off) % world
        dst = cu.CUdeviceptr(int(remote[peer]) + me * chunk)
        src = cu.CUdeviceptr(x.data_ptr() + peer * chunk)
        _ok(cu.cuMemcpyDtoDAsync(dst, src, chunk, stream))  # expect: copy_engine hot
    _ok(cu.cuStreamSynchronize(stream))
    dist.barrier()  # expect: nccl_metadata hot
    return buf.clone()
