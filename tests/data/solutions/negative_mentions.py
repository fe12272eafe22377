"""Mentions without use: multimem.ld_reduce, cudaMemcpyPeerAsync, nvshmem_put, dist.all_reduce,
torch.cuda.synchronize() and cp.async.bulk appear in this docstring only."""

import torch
import torch.distributed as dist
from torch.utils.cpp_extension import load_inline

# a comment: multimem.st and dist.barrier() and x.item() are not used here
SRC = r"""
#include <torch/extension.h>
// multimem.ld_reduce would need NVLS; cudaMemcpyPeerAsync would use the copy engine
/* nvshmem_float_put(dst, src, n, pe); cp.async.bulk.tensor; barrier_all(G.bar);
   ptrs[p][i] for p < world_size */
__global__ void scale(float* x, int64_t n) {
    int64_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= 2.f;  // not multimem.st
}
void run(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "multimem.ld_reduce and cudaDeviceSynchronize() unsupported");
    scale<<<(x.numel() + 255) / 256, 256>>>(x.data_ptr<float>(), x.numel());
}
"""

HELP = "try multimem.ld_reduce or nvshmem_put or cudaMemcpyPeerAsync(...) for speed"

_ext = load_inline("neg_ext", cpp_sources="", cuda_sources=SRC)


def solution(x: torch.Tensor) -> torch.Tensor:
    """torch.cuda.synchronize(); dist.all_reduce(x); x.item()"""
    rank = dist.get_rank()
    world = dist.get_world_size()
    assert dist.is_initialized() and rank < world, HELP
    _ext.run(x)  # dist.barrier() would go here
    return x
