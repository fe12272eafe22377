import torch
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <nvshmem.h>
#include <nvshmemx.h>
__global__ void push_all(float* sym_dst, const float* src, int n, int npes, int me) {
    for (int pe = 0; pe < npes; ++pe) {
        nvshmemx_float_put_block(sym_dst + me * n, src, n, pe);
    }
    nvshmemx_barrier_all_block();
}
"""

_ext = load_inline("shmem_ext", cpp_sources="", cuda_sources=SRC, functions=["push_all"])


def solution(x: torch.Tensor) -> torch.Tensor:
    return _ext.push_all(x)
