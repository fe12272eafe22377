"""All-gather with a vectorised (uint4) SM kernel; unaligned sizes use a copy-engine path."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
__global__ void gather_vec(const long long* ptrs, uint4* out, long long n_vec) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    int src = blockIdx.y;
    if (i < n_vec) out[src * n_vec + i] = reinterpret_cast<const uint4*>(ptrs[src])[i];
}
void gather_sm(torch::Tensor ptrs, torch::Tensor out, int64_t world) {
    long long n_vec = out.nbytes() / 16 / world;
    dim3 grid((n_vec + 255) / 256, world);
    gather_vec<<<grid, 256, 0, at::cuda::getCurrentCUDAStream()>>>((const long long*)ptrs.data_ptr(), (uint4*)out.data_ptr(), n_vec);
}
void gather_ce(torch::Tensor out, std::vector<int64_t> ptrs, int64_t me) {
    size_t bytes = out.nbytes() / ptrs.size();
    for (size_t r = 0; r < ptrs.size(); ++r)
        cudaMemcpyPeerAsync((char*)out.data_ptr() + r * bytes, me, (void*)ptrs[r], r, bytes, at::cuda::getCurrentCUDAStream());  // # expect: copy_engine fallback
}
"""
_ext = load_inline("gather_vec", cpp_sources="void gather_sm(torch::Tensor, torch::Tensor, int64_t);\n"
                   "void gather_ce(torch::Tensor, std::vector<int64_t>, int64_t);",
                   cuda_sources=CUDA_SRC, functions=["gather_sm", "gather_ce"])
_ctx = {}


def solution(x: torch.Tensor) -> torch.Tensor:
    if "hdl" not in _ctx:
        _ctx["buf"] = symm_mem.empty(x.numel(), dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        _ctx["hdl"] = symm_mem.rendezvous(_ctx["buf"], dist.group.WORLD)  # expect: rendezvous setup
        _ctx["tab"] = torch.tensor(_ctx["hdl"].buffer_ptrs, dtype=torch.int64, device=x.device)
    buf, hdl = _ctx["buf"], _ctx["hdl"]
    buf.copy_(x.view(-1))
    dist.barrier()  # expect: nccl_metadata hot
    out = torch.empty(hdl.world_size * x.shape[0], *x.shape[1:], dtype=x.dtype, device=x.device)
    if x.nbytes % 16 != 0:
        _ext.gather_ce(out, list(hdl.buffer_ptrs), hdl.rank)
    else:
        _ext.gather_sm(_ctx["tab"], out, hdl.world_size)
    dist.barrier()  # expect: nccl_metadata hot
    return out
