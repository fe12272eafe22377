import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda.h>

void fetch_block(torch::Tensor dst, int64_t peer_base, int64_t block, int64_t block_bytes) {
    CUstream stream = (CUstream)at::cuda::getCurrentCUDAStream().stream();
    CUdeviceptr src = (CUdeviceptr)(peer_base + block * block_bytes);
    CUdeviceptr d = (CUdeviceptr)dst.data_ptr();
    cuMemcpyDtoDAsync(d, src, block_bytes, stream);  // # expect: copy_engine hot
}

void stash(torch::Tensor dst, torch::Tensor src) {
    CUstream stream = (CUstream)at::cuda::getCurrentCUDAStream().stream();
    cuMemcpyDtoDAsync((CUdeviceptr)dst.data_ptr(), (CUdeviceptr)src.data_ptr(), src.numel() * src.element_size(), stream);
}
"""

_EXT = load_inline(
    name="dtod_block_fetch",
    cpp_sources=_SRC,
    functions=["fetch_block", "stash"],
    with_cuda=True,
    extra_ldflags=["-lcuda"],
)


def solution(x: torch.Tensor) -> torch.Tensor:
    rank = dist.get_rank()
    world = dist.get_world_size()
    if not hasattr(solution, "_hdl"):
        solution._buf = symm_mem.empty(x.shape, dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        solution._hdl = symm_mem.rendezvous(solution._buf, dist.group.WORLD.group_name)  # expect: rendezvous setup
    buf, hdl = solution._buf, solution._hdl
    _EXT.stash(buf, x.contiguous())
    hdl.barrier()
    rows = x.shape[0] // world
    block_bytes = rows * x.shape[1] * x.element_size()
    # all-to-all by pulls: block `rank` of every peer lands in slot `peer`
    out = torch.empty_like(x)
    for p in range(world):
        _EXT.fetch_block(out[p * rows : (p + 1) * rows], hdl.buffer_ptrs[p], rank, block_bytes)
    hdl.barrier()
    return out
