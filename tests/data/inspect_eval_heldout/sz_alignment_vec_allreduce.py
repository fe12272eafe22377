"""One-shot all-reduce with 16-byte vectorised loads (8 x bf16 per thread).

The kernel needs numel % 8 == 0 and 16-byte aligned pointers; other inputs go
through NCCL."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_bf16.h>
__global__ void ar_vec8(const int64_t* __restrict__ ptrs, uint4* __restrict__ out, int64_t nvec, int world) {
    for (int64_t v = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; v < nvec; v += (int64_t)gridDim.x * blockDim.x) {
        float acc[8] = {0.f};
        for (int r = 0; r < world; ++r) {
            uint4 pk = reinterpret_cast<const uint4*>(ptrs[r])[v];
            const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&pk);
            #pragma unroll
            for (int j = 0; j < 4; ++j) { float2 f = __bfloat1622float2(h[j]); acc[2*j] += f.x; acc[2*j+1] += f.y; }
        }
        uint4 res; __nv_bfloat162* o = reinterpret_cast<__nv_bfloat162*>(&res);
        #pragma unroll
        for (int j = 0; j < 4; ++j) o[j] = __floats2bfloat162_rn(acc[2*j], acc[2*j+1]);
        out[v] = res;
    }
}
void allreduce_vec8(torch::Tensor ptrs, torch::Tensor out, int64_t world) {
    int64_t nvec = out.numel() / 8;
    ar_vec8<<<528, 256, 0, at::cuda::getCurrentCUDAStream()>>>(ptrs.data_ptr<int64_t>(), (uint4*)out.data_ptr(), nvec, (int)world);
}
"""
_mod = load_inline("pkb_ar_vec8", cpp_sources="void allreduce_vec8(torch::Tensor, torch::Tensor, int64_t);",
                   cuda_sources=_SRC, functions=["allreduce_vec8"], extra_cuda_cflags=["-O3", "--use_fast_math"])
_hdl = None


def _handle(x: torch.Tensor):
    global _hdl
    if _hdl is None:
        buf = symm_mem.empty(x.numel(), dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        h = symm_mem.rendezvous(buf, dist.group.WORLD.group_name)  # expect: rendezvous setup
        _hdl = (buf, h, torch.tensor(h.buffer_ptrs, dtype=torch.int64, device=x.device))
    return _hdl


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    x = tensor if tensor.is_contiguous() else tensor.contiguous()
    if x.dtype != torch.bfloat16 or x.numel() % 8 != 0 or x.data_ptr() % 16 != 0:
        out = x.clone()
        dist.all_reduce(out)  # expect: nccl_payload fallback
        return out
    buf, h, ptrs = _handle(x)
    buf.copy_(x.view(-1))
    h.barrier(channel=0)
    out = torch.empty_like(x)
    _mod.allreduce_vec8(ptrs, out, h.world_size)
    h.barrier(channel=1)
    return out
