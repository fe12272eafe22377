"""All-gather with the CUDA driver API: each rank pulls the peers' shards out of
their symmetric buffers with cuMemcpyDtoDAsync; its own shard is copied locally."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from cuda import cuda

_sym = None


def _drv(res):
    err = res[0]
    if err != cuda.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"CUDA driver error {err}")
    return res[1:] if len(res) > 1 else None


def _symmetric(x: torch.Tensor):
    global _sym
    if _sym is None:
        buf = symm_mem.empty(x.numel(), dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        hdl = symm_mem.rendezvous(buf, dist.group.WORLD.group_name)  # expect: rendezvous setup
        _sym = (buf, hdl)
    return _sym


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    x = tensor.contiguous()
    buf, hdl = _symmetric(x)
    rank, world = hdl.rank, hdl.world_size
    nbytes = x.numel() * x.element_size()
    out = x.new_empty((world * x.shape[0], *x.shape[1:]))
    stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
    _drv(cuda.cuMemcpyDtoDAsync(buf.data_ptr(), x.data_ptr(), nbytes, stream))
    hdl.barrier(channel=0)
    base = out.data_ptr()
    for r in range(world):
        dst = cuda.CUdeviceptr(base + r * nbytes)
        if r == rank:
            _drv(cuda.cuMemcpyDtoDAsync(dst, x.data_ptr(), nbytes, stream))
        else:
            src = cuda.CUdeviceptr(hdl.buffer_ptrs[r])
            _drv(cuda.cuMemcpyDtoDAsync(dst, src, nbytes, stream))  # expect: copy_engine hot
    hdl.barrier(channel=1)
    return out
