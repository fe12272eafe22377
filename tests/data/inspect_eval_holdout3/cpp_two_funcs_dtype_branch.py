import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>
#include <vector>

void ring_push_half(torch::Tensor chunk, std::vector<int64_t> ptrs, int64_t rank, int64_t slot) {
    auto stream = at::cuda::getCurrentCUDAStream();
    int64_t nbytes = chunk.numel() * chunk.element_size();
    int64_t right = (rank + 1) % (int64_t)ptrs.size();
    char* dst = reinterpret_cast<char*>(ptrs[right]) + slot * nbytes;
    cudaMemcpyAsync(dst, chunk.data_ptr(), nbytes, cudaMemcpyDeviceToDevice, stream);  // # expect: copy_engine hot
}

void ring_push_fp32(torch::Tensor chunk, std::vector<int64_t> ptrs, int64_t rank, int64_t slot) {
    auto stream = at::cuda::getCurrentCUDAStream();
    int64_t nbytes = chunk.numel() * chunk.element_size();
    int64_t right = (rank + 1) % (int64_t)ptrs.size();
    char* dst = reinterpret_cast<char*>(ptrs[right]) + slot * nbytes;
    cudaMemcpyPeerAsync(dst, (int)right, chunk.data_ptr(), chunk.get_device(), nbytes, stream);  // # expect: copy_engine fallback
}
"""

_EXT = load_inline(name="ring_push_two", cpp_sources=_SRC, functions=["ring_push_half", "ring_push_fp32"], with_cuda=True)
_SYMM = {}


def solution(x: torch.Tensor) -> torch.Tensor:
    rank = dist.get_rank()
    world = dist.get_world_size()
    if x.dtype not in _SYMM:
        _SYMM[x.dtype] = symm_mem.empty((world,) + tuple(x.shape), dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        _SYMM[(x.dtype, "h")] = symm_mem.rendezvous(_SYMM[x.dtype], dist.group.WORLD.group_name)  # expect: rendezvous setup
    buf, hdl = _SYMM[x.dtype], _SYMM[(x.dtype, "h")]
    cur = x.contiguous()
    for step in range(world - 1):
        hdl.barrier()
        if x.dtype in (torch.bfloat16, torch.float16):
            _EXT.ring_push_half(cur, hdl.buffer_ptrs, rank, step)
        elif x.dtype == torch.float32:
            _EXT.ring_push_fp32(cur, hdl.buffer_ptrs, rank, step)
        else:
            raise TypeError(x.dtype)
        hdl.barrier()
        cur = buf[step]
    return buf[: world - 1].sum(dim=0) + x
