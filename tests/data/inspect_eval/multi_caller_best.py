"""Two-shot all-reduce: custom reduce-scatter in CUDA, NCCL all-gather; NCCL all-gather + local sum for odd sizes."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <torch/extension.h>
#include <cuda_bf16.h>
__global__ void rs(const long* p, __nv_bfloat16* out, int w, int r, long c) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i >= c) return;
    float s = 0.f;
    for (int k = 0; k < w; ++k) s += __bfloat162float(((const __nv_bfloat16*)p[k])[r * c + i]);
    out[i] = __float2bfloat16(s);
}
void launch(torch::Tensor p, torch::Tensor out, int64_t w, int64_t r) {
    long c = out.numel();
    rs<<<(c + 255) / 256, 256>>>(p.data_ptr<long>(), (__nv_bfloat16*)out.data_ptr(), w, r, c);
}
"""
_ext = load_inline("rs_ag", "void launch(torch::Tensor, torch::Tensor, int64_t, int64_t);", cuda_sources=SRC,
                   functions=["launch"])
_h = {}


def _nccl_gather(out, inp):
    dist.all_gather_into_tensor(out, inp)  # expect: nccl_payload hot
    return out


def solution(x: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    if x.numel() % world:
        g = _nccl_gather(x.new_empty(world * x.numel()), x.reshape(-1))
        return g.view(world, *x.shape).sum(0, dtype=torch.float32).to(x.dtype)
    if "hdl" not in _h:
        _h["buf"] = symm_mem.empty(x.numel(), dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        _h["hdl"] = symm_mem.rendezvous(_h["buf"], dist.group.WORLD)  # expect: rendezvous setup
        _h["ptrs"] = torch.tensor(_h["hdl"].buffer_ptrs, device=x.device)
    _h["buf"].copy_(x.view(-1))
    dist.barrier()  # expect: nccl_metadata hot
    part = torch.empty(x.numel() // world, dtype=x.dtype, device=x.device)
    _ext.launch(_h["ptrs"], part, world, _h["hdl"].rank)
    dist.barrier()  # expect: nccl_metadata hot
    return _nccl_gather(torch.empty_like(x).view(-1), part).view_as(x)
