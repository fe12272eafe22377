import torch
from torch.utils.cpp_extension import load_inline

SRC = r"""
__global__ void one_shot_sum(float** ptrs, float* out, int64_t n, int world_size) {
    for (int64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float acc = 0.f;
        for (int p = 0; p < world_size; ++p) {
            acc += ptrs[p][i];
        }
        out[i] = acc;
    }
}
"""

_ext = load_inline("os_ext", cpp_sources="", cuda_sources=SRC, functions=["one_shot_sum"])


def solution(x: torch.Tensor, ptrs: torch.Tensor) -> torch.Tensor:
    return _ext.one_shot_sum(ptrs, x)
