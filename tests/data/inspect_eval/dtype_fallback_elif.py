"""One-shot all-reduce: every rank reads all peers through symmetric memory.

16-bit types go through the custom kernel, anything else falls back to NCCL.
"""
import functools

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline

_CUDA = r"""
#include <torch/extension.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
template <typename T>
__global__ void one_shot_sum(const int64_t* ptrs, T* out, int world, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= n) return;
    float acc = 0.f;
    for (int r = 0; r < world; ++r) acc += (float)(reinterpret_cast<const T*>(ptrs[r])[i]);
    out[i] = (T)acc;
}
void run(torch::Tensor ptrs, torch::Tensor out, int64_t world) {
    int64_t n = out.numel();
    int blocks = (int)((n + 511) / 512);
    if (out.scalar_type() == at::kBFloat16)
        one_shot_sum<<<blocks, 512>>>(ptrs.data_ptr<int64_t>(), (__nv_bfloat16*)out.data_ptr(), (int)world, n);
    else
        one_shot_sum<<<blocks, 512>>>(ptrs.data_ptr<int64_t>(), (__half*)out.data_ptr(), (int)world, n);
}
"""
_ext = load_inline("one_shot_sum_ext", cpp_sources="void run(torch::Tensor, torch::Tensor, int64_t);",
                   cuda_sources=_CUDA, functions=["run"])


@functools.cache
def _workspace(numel, dtype, device):
    buf = symm_mem.empty(numel, dtype=dtype, device=device)  # expect: rendezvous setup
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD.group_name)  # expect: rendezvous setup
    ptrs = torch.tensor(hdl.buffer_ptrs, dtype=torch.int64, device=device)
    return buf, hdl, ptrs


def _one_shot(x):
    buf, hdl, ptrs = _workspace(x.numel(), x.dtype, x.device)
    buf.copy_(x.reshape(-1))
    dist.barrier()  # expect: nccl_metadata hot
    out = torch.empty_like(x)
    _ext.run(ptrs, out, hdl.world_size)
    dist.barrier()  # expect: nccl_metadata hot
    return out


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    if tensor.dtype == torch.bfloat16:
        return _one_shot(tensor)
    elif tensor.dtype == torch.float16:
        return _one_shot(tensor)
    else:
        out = tensor.clone()
        dist.all_reduce(out)  # expect: nccl_payload fallback
        return out
