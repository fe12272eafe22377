import torch
from torch.utils.cpp_extension import load_inline

SRC = r"""
__device__ void wait_flag(int* flag) {
    int v = 0;
    do {
        asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(flag));
    } while (v == 0);
}
__global__ void softmax_pull(const float* remote_logits, float* out, int* flag, int64_t n) {
    wait_flag(flag);
    int64_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = expf(remote_logits[i]);
    atomicAdd_system(flag, 1);
}
"""

_ext = load_inline("fused_ext", cpp_sources="", cuda_sources=SRC, functions=["softmax_pull"])


def solution(x: torch.Tensor) -> torch.Tensor:
    return _ext.softmax_pull(x)
