import torch
from torch.utils.cpp_extension import load_inline

SRC = r"""
__global__ void reduce_my_chunk(float** ptrs, float* out, int64_t chunk, int rank, int world_size) {
    int64_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= chunk) return;
    float acc = 0.f;
    for (int p = 0; p < world_size; ++p) {
        acc += ptrs[p][rank * chunk + i];
    }
    for (int p = 0; p < world_size; ++p) {
        ptrs[p][rank * chunk + i] = acc;
    }
}
"""

_ext = load_inline("ts_ext", cpp_sources="", cuda_sources=SRC, functions=["reduce_my_chunk"])


def solution(x: torch.Tensor, ptrs: torch.Tensor) -> torch.Tensor:
    return _ext.reduce_my_chunk(ptrs, x)
