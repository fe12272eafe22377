"""Latency-optimised custom all-reduce for small messages; large messages stay on NCCL."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline

_ONE_MB = 1 << 20
CUDA = r"""
#include <torch/extension.h>
#include <cuda_bf16.h>
__global__ void small_ar(const long* ptrs, __nv_bfloat16* out, int world, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float acc = 0.f;
    #pragma unroll 8
    for (int r = 0; r < world; ++r) acc += __bfloat162float(((const __nv_bfloat16*)ptrs[r])[i]);
    out[i] = __float2bfloat16(acc);
}
void small_allreduce(torch::Tensor ptrs, torch::Tensor out, int64_t world) {
    int n = out.numel();
    small_ar<<<(n + 127) / 128, 128>>>(ptrs.data_ptr<long>(), (__nv_bfloat16*)out.data_ptr(), world, n);
}
"""
_ext = load_inline("small_ar", "void small_allreduce(torch::Tensor, torch::Tensor, int64_t);",
                   cuda_sources=CUDA, functions=["small_allreduce"])
_scratch = None


def _small(x):
    global _scratch
    if _scratch is None:
        buf = symm_mem.empty(_ONE_MB // 2, dtype=torch.bfloat16, device=x.device)  # expect: rendezvous fallback
        hdl = symm_mem.rendezvous(buf, dist.group.WORLD)  # expect: rendezvous fallback
        _scratch = (buf, hdl, torch.tensor(hdl.buffer_ptrs, dtype=torch.long, device=x.device))
    buf, hdl, ptrs = _scratch
    buf[: x.numel()].copy_(x.view(-1))
    dist.barrier()  # expect: nccl_metadata fallback
    out = torch.empty_like(x)
    _ext.small_allreduce(ptrs, out, hdl.world_size)
    dist.barrier()  # expect: nccl_metadata fallback
    return out


@torch.no_grad()
def solution(x: torch.Tensor) -> torch.Tensor:
    if x.numel() * x.element_size() >= _ONE_MB:
        out = x.clone()
        dist.all_reduce(out)  # expect: nccl_payload hot
        return out
    return _small(x)
