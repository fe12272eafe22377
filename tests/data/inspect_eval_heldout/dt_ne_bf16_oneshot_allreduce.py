"""One-shot all-reduce over symmetric memory.

Every rank copies its input into a symmetric buffer; a single kernel then sums the
W peer buffers through UVA pointers. Only bf16 is compiled, other dtypes use NCCL.
"""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline

_CPP = "void one_shot_allreduce(torch::Tensor ptrs, torch::Tensor out, int64_t world);"
_CUDA = r"""
#include <torch/extension.h>
#include <cuda_bf16.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void one_shot_kernel(const int64_t* ptrs, __nv_bfloat16* out, int64_t n, int world) {
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float acc = 0.f;
        #pragma unroll 8
        for (int r = 0; r < world; ++r)
            acc += __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(ptrs[r])[i]);
        out[i] = __float2bfloat16(acc);
    }
}

void one_shot_allreduce(torch::Tensor ptrs, torch::Tensor out, int64_t world) {
    auto stream = at::cuda::getCurrentCUDAStream();
    one_shot_kernel<<<132 * 4, 512, 0, stream>>>(
        ptrs.data_ptr<int64_t>(), reinterpret_cast<__nv_bfloat16*>(out.data_ptr()),
        out.numel(), (int)world);
}
"""

_ext = None
_state = {}


def _module():
    global _ext
    if _ext is None:
        _ext = load_inline("pkb_oneshot_ar_bf16", cpp_sources=_CPP, cuda_sources=_CUDA,
                           functions=["one_shot_allreduce"], extra_cuda_cflags=["-O3"])
    return _ext


def _workspace(numel: int, device: torch.device):
    key = (numel, device)
    if key not in _state:
        buf = symm_mem.empty(numel, dtype=torch.bfloat16, device=device)  # expect: rendezvous setup
        hdl = symm_mem.rendezvous(buf, dist.group.WORLD.group_name)  # expect: rendezvous setup
        ptrs = torch.tensor(hdl.buffer_ptrs, dtype=torch.int64, device=device)
        _state[key] = (buf, hdl, ptrs)
    return _state[key]


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    if tensor.dtype != torch.bfloat16:
        out = tensor.clone()
        dist.all_reduce(out, op=dist.ReduceOp.SUM)  # expect: nccl_payload fallback
        return out

    x = tensor.contiguous()
    buf, hdl, ptrs = _workspace(x.numel(), x.device)
    buf.copy_(x.view(-1))
    hdl.barrier(channel=0)
    out = torch.empty_like(x)
    _module().one_shot_allreduce(ptrs, out, hdl.world_size)
    hdl.barrier(channel=1)
    return out
