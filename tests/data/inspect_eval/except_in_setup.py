import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline

_KERNEL = r"""
#include <torch/extension.h>
#include <cuda_bf16.h>
__global__ void bcast_pull(const __nv_bfloat16* __restrict__ root, __nv_bfloat16* __restrict__ dst, long n) {
    long i = (blockIdx.x * (long)blockDim.x + threadIdx.x) * 8;
    if (i + 8 <= n) *reinterpret_cast<uint4*>(dst + i) = *reinterpret_cast<const uint4*>(root + i);
}
void pull(int64_t root_ptr, torch::Tensor dst) {
    long n = dst.numel();
    bcast_pull<<<(n / 8 + 255) / 256, 256>>>((const __nv_bfloat16*)root_ptr, (__nv_bfloat16*)dst.data_ptr(), n);
}
"""
_ext = load_inline("bcast_pull", "void pull(int64_t, torch::Tensor);", cuda_sources=_KERNEL, functions=["pull"])
_ctx = None


def _init(x):
    global _ctx
    if _ctx is not None:
        return _ctx
    try:
        buf = symm_mem.empty(x.numel(), dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        hdl = symm_mem.rendezvous(buf, dist.group.WORLD)  # expect: rendezvous setup
        _ctx = (buf, hdl)
    except RuntimeError as err:
        dist.barrier()  # expect: nccl_metadata fallback
        raise RuntimeError("symmetric memory is not available on this system") from err
    return _ctx


def solution(x: torch.Tensor) -> torch.Tensor:
    """Broadcast from rank 0: the SM kernel reads rank 0's symmetric buffer directly."""
    buf, hdl = _init(x)
    if hdl.rank == 0:
        buf.copy_(x.reshape(-1))
    dist.barrier()  # expect: nccl_metadata hot
    out = torch.empty_like(x)
    _ext.pull(hdl.buffer_ptrs[0], out)
    dist.barrier()  # expect: nccl_metadata hot
    return out
