import torch
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <cuda_bf16.h>
__global__ void mc_allreduce(uint4* mc, int64_t n_vec) {
    int64_t step = gridDim.x * blockDim.x;
    for (int64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n_vec; i += step) {
        uint32_t a, b, c, d;
        asm volatile("multimem.ld_reduce.relaxed.sys.global.add.v4.bf16x2 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a), "=r"(b), "=r"(c), "=r"(d) : "l"(mc + i) : "memory");
        asm volatile("multimem.st.relaxed.sys.global.v4.f32 [%0], {%1,%2,%3,%4};"
                     :: "l"(mc + i), "r"(a), "r"(b), "r"(c), "r"(d) : "memory");
    }
}
"""

_ext = load_inline("mc_ext", cpp_sources="", cuda_sources=SRC, functions=["mc_allreduce"])


def solution(x: torch.Tensor, mc_ptr: int) -> torch.Tensor:
    _ext.mc_allreduce(mc_ptr, x.numel() // 8)
    return x
