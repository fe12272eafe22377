import torch
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <cuda_fp16.h>
__global__ void gather_cols(const float* remote, float* out, int64_t rows, int64_t stride) {
    int64_t idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < rows) out[idx] = remote[idx * stride];
}
__global__ void add_halves(const __half* peer, __half* out, int64_t n) {
    int64_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = __hadd(out[i], peer[i]);
}
__global__ void add_vec(const __half* peer, __half* out, int64_t n) {
    const uint4* v = reinterpret_cast<const uint4*>(peer);
    int64_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n / 8) reinterpret_cast<uint4*>(out)[i] = v[i];
}
"""

_ext = load_inline("unc_ext", cpp_sources="", cuda_sources=SRC,
                   functions=["gather_cols", "add_halves", "add_vec"])


def solution(x: torch.Tensor, remote_ptr: int) -> torch.Tensor:
    return _ext.gather_cols(x, remote_ptr)
