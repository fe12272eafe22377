import torch
from torch.utils.cpp_extension import load_inline
from utils.parallelkittens_runtime import get_or_create_parallel_tensor

SRC = r"""
#include "kittens.cuh"
using namespace kittens;
namespace gather {
struct globals {
    using layout = pgl<gl<bf16, -1, -1, -1, -1>, 8, false>;
    layout out;
    layout in;
    const int dev_idx;
};
__device__ inline void kernel(const globals &G) {
    for (int dev = 0; dev < 8; dev++) {
        G.out[dev].raw_ptr[G.dev_idx * blockDim.x + threadIdx.x] = 0;
    }
}
}
void entry(kittens::py::TKParallelTensor &out, kittens::py::TKParallelTensor &in) {
    gather::globals G{kittens::py::parallel_tensor_to_pgl<gather::globals::layout>(out),
                      kittens::py::parallel_tensor_to_pgl<gather::globals::layout>(in),
                      out.local_rank_};
    kittens::py::launch_kernel<gather::config, gather::globals, gather::kernel>(G);
}
"""

_ext = load_inline("tk_ext", cpp_sources="", cuda_sources=SRC)


def solution(x: torch.Tensor) -> torch.Tensor:
    out = get_or_create_parallel_tensor(_ext, x.shape, x.dtype)
    _ext.entry(out, out)
    return out.data_
