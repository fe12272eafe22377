import torch
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <cuda.h>
__global__ void bulk_pull(const float* remote, float* out, int n) {
    extern __shared__ float stage[];
    unsigned bytes = 4096;
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1], %2, [%3];"
                 :: "r"(0), "l"(remote + blockIdx.x * 1024), "r"(bytes), "r"(0) : "memory");
    out[blockIdx.x * 1024 + threadIdx.x] = stage[threadIdx.x];
}
"""

_ext = load_inline("tma_ext", cpp_sources="", cuda_sources=SRC, functions=["bulk_pull"])


def solution(x: torch.Tensor) -> torch.Tensor:
    return _ext.bulk_pull(x)
