import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline

_CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>
#include <vector>

__global__ void sum_peers(const int64_t* table, __nv_bfloat16* out, int world, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= n) return;
    float acc = 0.f;
    for (int p = 0; p < world; ++p) acc += __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(table[p])[i]);
    out[i] = __float2bfloat16(acc);
}

torch::Tensor all_reduce_ld(torch::Tensor x, std::vector<int64_t> ptrs, torch::Tensor table, int64_t rank) {
    auto stream = at::cuda::getCurrentCUDAStream();
    int64_t nbytes = x.numel() * x.element_size();
    cudaMemcpyAsync(table.data_ptr(), ptrs.data(), ptrs.size() * sizeof(int64_t), cudaMemcpyHostToDevice, stream);
    cudaMemcpyAsync(reinterpret_cast<void*>(ptrs[rank]), x.data_ptr(), nbytes, cudaMemcpyDeviceToDevice, stream);
    auto out = torch::empty_like(x);
    cudaMemsetAsync(out.data_ptr(), 0, nbytes, stream);
    auto scratch = torch::empty_like(x);
    cudaMemcpyAsync(scratch.data_ptr(), x.data_ptr(), nbytes, cudaMemcpyDeviceToDevice, stream);
    int64_t n = x.numel();
    sum_peers<<<(n + 255) / 256, 256, 0, stream>>>(table.data_ptr<int64_t>(),
        reinterpret_cast<__nv_bfloat16*>(out.data_ptr()), (int)ptrs.size(), n);
    return out;
}
"""
_CPP = "torch::Tensor all_reduce_ld(torch::Tensor x, std::vector<int64_t> ptrs, torch::Tensor table, int64_t rank);"

_EXT = load_inline(name="ld_allreduce", cpp_sources=_CPP, cuda_sources=_CUDA, functions=["all_reduce_ld"])
_CTX = {}


def solution(x: torch.Tensor) -> torch.Tensor:
    if not _CTX:
        _CTX["buf"] = symm_mem.empty(x.numel(), dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        _CTX["hdl"] = symm_mem.rendezvous(_CTX["buf"], dist.group.WORLD.group_name)  # expect: rendezvous setup
        _CTX["table"] = torch.empty(dist.get_world_size(), dtype=torch.int64, device=x.device)
    hdl = _CTX["hdl"]
    hdl.barrier()
    out = _EXT.all_reduce_ld(x.contiguous(), hdl.buffer_ptrs, _CTX["table"], dist.get_rank())
    hdl.barrier()
    return out.view_as(x)
