import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline

PAGE_ROWS = 64

_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>
#include <vector>

void copy_prefix(torch::Tensor dst, std::vector<int64_t> ptrs, int64_t rank, int64_t nbytes) {
    int64_t world = (int64_t)ptrs.size();
    int64_t owner = (rank + world - 1) % world;
    cudaMemcpyAsync(dst.data_ptr(), reinterpret_cast<void*>(ptrs[owner]), nbytes, cudaMemcpyDeviceToDevice, at::cuda::getCurrentCUDAStream());  // # expect: copy_engine setup
}

void pull_pages(torch::Tensor dst, std::vector<int64_t> ptrs, int64_t rank, int64_t page, int64_t page_bytes) {
    auto stream = at::cuda::getCurrentCUDAStream();
    char* d = static_cast<char*>(dst.data_ptr());
    cudaMemsetAsync(d, 0, dst.numel() * dst.element_size(), stream);
    for (int64_t p = 0; p < (int64_t)ptrs.size(); ++p) {
        if (p == rank) continue;
        const char* s = reinterpret_cast<const char*>(ptrs[p]) + page * page_bytes;
        cudaMemcpyAsync(d + p * page_bytes, s, page_bytes, cudaMemcpyDeviceToDevice, stream);  // # expect: copy_engine hot
    }
}

void pull_pages_2d(torch::Tensor dst, std::vector<int64_t> ptrs, int64_t rank, int64_t rows, int64_t row_bytes, int64_t pitch) {
    auto stream = at::cuda::getCurrentCUDAStream();
    for (int64_t p = 0; p < (int64_t)ptrs.size(); ++p) {
        if (p == rank) continue;
        char* d = static_cast<char*>(dst.data_ptr()) + p * row_bytes;
        cudaMemcpy2DAsync(d, pitch, reinterpret_cast<void*>(ptrs[p]), row_bytes, row_bytes, rows, cudaMemcpyDeviceToDevice, stream);  // # expect: copy_engine fallback
    }
}
"""

_EXT = load_inline(name="kv_pages", cpp_sources=_SRC, functions=["copy_prefix", "pull_pages", "pull_pages_2d"], with_cuda=True)
_KV = None


def solution(kv: torch.Tensor) -> torch.Tensor:
    global _KV
    rank = dist.get_rank()
    world = dist.get_world_size()
    if _KV is None:
        buf = symm_mem.empty(kv.shape, dtype=kv.dtype, device=kv.device)  # expect: rendezvous setup
        hdl = symm_mem.rendezvous(buf, dist.group.WORLD.group_name)  # expect: rendezvous setup
        buf.copy_(kv)
        hdl.barrier()
        prefix = torch.empty_like(kv)
        _EXT.copy_prefix(prefix, hdl.buffer_ptrs, rank, kv.numel() * kv.element_size())
        _KV = (buf, hdl, prefix)
    buf, hdl, prefix = _KV
    buf.copy_(kv)
    hdl.barrier()
    page = rank % (kv.shape[0] // PAGE_ROWS)
    if kv.dtype == torch.float32:
        out = torch.empty((kv.shape[0], world * kv.shape[1]), dtype=kv.dtype, device=kv.device)
        _EXT.pull_pages_2d(out, hdl.buffer_ptrs, rank, kv.shape[0], kv.shape[1] * 4, out.stride(0) * 4)
    else:
        out = torch.empty((world * PAGE_ROWS, kv.shape[1]), dtype=kv.dtype, device=kv.device)
        page_bytes = PAGE_ROWS * kv.shape[1] * kv.element_size()
        _EXT.pull_pages(out, hdl.buffer_ptrs, rank, page, page_bytes)
    hdl.barrier()
    return out.sum(dim=0, keepdim=True) + prefix[:1]
