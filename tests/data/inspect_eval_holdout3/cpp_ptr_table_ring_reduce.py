import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>
#include <vector>

void ring_stage(std::vector<int64_t> ptrs, torch::Tensor staging, torch::Tensor table_dev,
                int64_t rank, int64_t world, int64_t step, int64_t nbytes) {
    auto stream = at::cuda::getCurrentCUDAStream();
    // the pointer table for a later kernel, uploaded from the host
    cudaMemcpyAsync(table_dev.data_ptr(), ptrs.data(), ptrs.size() * sizeof(int64_t), cudaMemcpyHostToDevice, stream);
    int64_t src = (rank - step + world) % world;
    cudaMemcpyAsync(staging.data_ptr(), reinterpret_cast<void*>(ptrs[src]), nbytes, cudaMemcpyDeviceToDevice, stream);  // # expect: copy_engine hot
    // our own contribution next to it
    char* own_dst = static_cast<char*>(staging.data_ptr()) + nbytes;
    cudaMemcpyAsync(own_dst, reinterpret_cast<void*>(ptrs[rank]), nbytes, cudaMemcpyDeviceToDevice, stream);
}

void push_result(std::vector<int64_t> ptrs, torch::Tensor result, int64_t rank, int64_t world, int64_t nbytes) {
    auto stream = at::cuda::getCurrentCUDAStream();
    int64_t right = (rank + 1) % world;
    cudaMemcpyAsync(reinterpret_cast<void*>(ptrs[right]), result.data_ptr(), nbytes, cudaMemcpyDeviceToDevice, stream);  // # expect: copy_engine hot
}
"""

_EXT = load_inline(name="ptr_table_ring", cpp_sources=_SRC, functions=["ring_stage", "push_result"], with_cuda=True)
_BUF = {}


def solution(x: torch.Tensor) -> torch.Tensor:
    rank = dist.get_rank()
    world = dist.get_world_size()
    n = x.numel()
    if n not in _BUF:
        buf = symm_mem.empty(n, dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        hdl = symm_mem.rendezvous(buf, dist.group.WORLD)  # expect: rendezvous setup
        table = torch.empty(world, dtype=torch.int64, device=x.device)
        _BUF[n] = (buf, hdl, table)
    buf, hdl, table = _BUF[n]
    nbytes = n * x.element_size()
    staging = torch.empty(2 * n, dtype=x.dtype, device=x.device)
    buf.copy_(x.flatten())
    acc = x.flatten().float()
    for step in range(1, world):
        hdl.barrier()
        _EXT.ring_stage(hdl.buffer_ptrs, staging, table, rank, world, step, nbytes)
        torch.cuda.current_stream().synchronize()
        acc += staging[:n].float()
    hdl.barrier()
    _EXT.push_result(hdl.buffer_ptrs, acc.to(x.dtype), rank, world, nbytes)
    hdl.barrier()
    return acc.view_as(x).to(x.dtype)
