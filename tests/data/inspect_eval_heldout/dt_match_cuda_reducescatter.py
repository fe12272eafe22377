"""Reduce-scatter: one CUDA kernel per rank sums its output slice straight out of
every peer's symmetric buffer (16-bit floats only, fp32 accumulation)."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline

_CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
template <typename T> __device__ float to_f(T v);
template <> __device__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
template <> __device__ float to_f(__half v) { return __half2float(v); }

template <typename T>
__global__ void rs_kernel(const int64_t* ptrs, T* out, int64_t shard, int64_t off, int world) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < shard; i += (int64_t)gridDim.x * blockDim.x) {
        float acc = 0.f;
        for (int r = 0; r < world; ++r) acc += to_f(reinterpret_cast<const T*>(ptrs[r])[off + i]);
        out[i] = T(acc);
    }
}

void reduce_scatter(torch::Tensor ptrs, torch::Tensor out, int64_t rank, int64_t world) {
    auto s = at::cuda::getCurrentCUDAStream();
    int64_t shard = out.numel();
    if (out.scalar_type() == at::kBFloat16)
        rs_kernel<<<264, 512, 0, s>>>(ptrs.data_ptr<int64_t>(), (__nv_bfloat16*)out.data_ptr(), shard, rank * shard, (int)world);
    else
        rs_kernel<<<264, 512, 0, s>>>(ptrs.data_ptr<int64_t>(), (__half*)out.data_ptr(), shard, rank * shard, (int)world);
}
"""
_ext = load_inline("pkb_rs16", cpp_sources="void reduce_scatter(torch::Tensor, torch::Tensor, int64_t, int64_t);",
                   cuda_sources=_CUDA, functions=["reduce_scatter"])
_symm = {}


def _custom(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    key = (x.numel(), x.dtype)
    if key not in _symm:
        buf = symm_mem.empty(x.numel(), dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        hdl = symm_mem.rendezvous(buf, dist.group.WORLD.group_name)  # expect: rendezvous setup
        _symm[key] = (buf, hdl, torch.tensor(hdl.buffer_ptrs, dtype=torch.int64, device=x.device))
    buf, hdl, ptrs = _symm[key]
    buf.copy_(x.reshape(-1))
    hdl.barrier(channel=0)
    _ext.reduce_scatter(ptrs, out, hdl.rank, hdl.world_size)
    hdl.barrier(channel=1)
    return out


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    out = tensor.new_empty((tensor.shape[0] // world, *tensor.shape[1:]))
    match tensor.dtype:
        case torch.bfloat16 | torch.float16:
            return _custom(tensor, out)
        case torch.float32:
            dist.reduce_scatter_tensor(out, tensor.contiguous())  # expect: nccl_payload fallback
            return out
        case _:
            acc = torch.empty(out.shape, dtype=torch.float32, device=out.device)
            dist.reduce_scatter_tensor(acc, tensor.float().contiguous())  # expect: nccl_payload fallback
            return acc.to(tensor.dtype)
