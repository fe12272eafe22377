"""Vectorised (float4) one-shot all-reduce for fp32; other dtypes use NCCL."""
import functools

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
__global__ void ar_f4(const long long* peers, float4* out, int world, long long n4) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n4) return;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int r = 0; r < world; ++r) {
        float4 v = reinterpret_cast<const float4*>(peers[r])[i];
        acc.x += v.x; acc.y += v.y; acc.z += v.z; acc.w += v.w;
    }
    out[i] = acc;
}
void ar(torch::Tensor peers, torch::Tensor out, int64_t world) {
    long long n4 = out.numel() / 4;
    ar_f4<<<(n4 + 255) / 256, 256>>>((const long long*)peers.data_ptr(), (float4*)out.data_ptr(), world, n4);
}
"""


@functools.lru_cache(maxsize=None)
def _ext():
    return load_inline("ar_f4", cpp_sources="void ar(torch::Tensor, torch::Tensor, int64_t);",
                       cuda_sources=CUDA_SRC, functions=["ar"])


@functools.lru_cache(maxsize=4)
def _symm(numel, device_index):
    buf = symm_mem.empty(numel, dtype=torch.float32, device=f"cuda:{device_index}")  # expect: rendezvous fallback
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD)  # expect: rendezvous fallback
    return buf, hdl, torch.tensor(hdl.buffer_ptrs, dtype=torch.int64, device=buf.device)


def _fp32_allreduce(x):
    buf, hdl, peers = _symm(x.numel(), x.device.index)
    buf.copy_(x.view(-1))
    dist.barrier()  # expect: nccl_metadata fallback
    out = torch.empty_like(x)
    _ext().ar(peers, out, hdl.world_size)
    dist.barrier()  # expect: nccl_metadata fallback
    return out


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    if tensor.dtype == torch.float32 and tensor.numel() % 4 == 0:
        return _fp32_allreduce(tensor)
    out = tensor.clone()
    dist.all_reduce(out)  # expect: nccl_payload hot
    return out
