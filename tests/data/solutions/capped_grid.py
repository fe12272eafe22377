import torch
import triton
import triton.language as tl
from torch.utils.cpp_extension import load_inline

SRC = r"""
#define NUM_BLOCKS 4
__global__ void copy_rows(const float* src, float* dst, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        dst[i] = src[i];
}
__global__ void signal(int* flag) { *flag = 1; }
void run(const float* src, float* dst, int n, int* flag) {
    int threads = 512;
    int blocks = (n + threads - 1) / threads;
    copy_rows<<<8, 256>>>(src, dst, n);
    copy_rows<<<dim3(NUM_BLOCKS, 2), threads>>>(src, dst, n);
    copy_rows<<<blocks, threads>>>(src, dst, n);
    signal<<<1, 1>>>(flag);
}
"""


@triton.jit
def scale_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


_ext = load_inline("grid_ext", cpp_sources="", cuda_sources=SRC)
SMALL_GRID = (2, 2)


def solution(x: torch.Tensor) -> torch.Tensor:
    scale_kernel[(4,)](x, x.numel(), BLOCK=1024)
    scale_kernel[SMALL_GRID](x, x.numel(), BLOCK=1024)
    scale_kernel[(triton.cdiv(x.numel(), 1024),)](x, x.numel(), BLOCK=1024)
    return x
