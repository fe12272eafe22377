"""One-shot all-reduce kernel; the peer pointer table is uploaded with a host-to-device memcpy."""
import ctypes

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline

_rt = ctypes.CDLL("libcudart.so")
_H2D = 1
KERNEL = r"""
#include <torch/extension.h>
#include <cuda_bf16.h>
__global__ void ar(const __nv_bfloat16* const* peers, __nv_bfloat16* out, int world, long n) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
        float s = 0.f;
        for (int r = 0; r < world; ++r) s += __bfloat162float(peers[r][i]);
        out[i] = __float2bfloat16(s);
    }
}
void run(torch::Tensor table, torch::Tensor out, int64_t world) {
    ar<<<264, 512>>>((const __nv_bfloat16* const*)table.data_ptr(), (__nv_bfloat16*)out.data_ptr(), world, out.numel());
}
"""
_ext = load_inline("ar_table", "void run(torch::Tensor, torch::Tensor, int64_t);", cuda_sources=KERNEL, functions=["run"])
_st = {}


def _init(x):
    if "h" in _st:
        return _st
    _st["b"] = symm_mem.empty(x.numel(), dtype=x.dtype, device=x.device)  # expect: rendezvous setup
    _st["h"] = symm_mem.rendezvous(_st["b"], dist.group.WORLD)  # expect: rendezvous setup
    host = (ctypes.c_uint64 * _st["h"].world_size)(*_st["h"].buffer_ptrs)
    _st["t"] = torch.empty(_st["h"].world_size, dtype=torch.int64, device=x.device)
    _rt.cudaMemcpy(ctypes.c_void_p(_st["t"].data_ptr()), host, ctypes.sizeof(host), _H2D)
    return _st


def solution(x: torch.Tensor) -> torch.Tensor:
    st = _init(x)
    st["b"].copy_(x.view(-1))
    dist.barrier()  # expect: nccl_metadata hot
    out = torch.empty_like(x)
    _ext.run(st["t"], out, st["h"].world_size)
    dist.barrier()  # expect: nccl_metadata hot
    return out
