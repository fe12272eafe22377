"""Reduce-scatter with a CUDA kernel reading peers' inputs through CUDA IPC."""
import torch
import torch.distributed as dist
from cuda import cudart
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <torch/extension.h>
#include <cuda_bf16.h>
__global__ void rs_bf16(const unsigned long long* ptrs, __nv_bfloat16* out, int world, int rank, long chunk) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i >= chunk) return;
    float s = 0.f;
    for (int r = 0; r < world; ++r)
        s += __bfloat162float(((const __nv_bfloat16*)ptrs[r])[rank * chunk + i]);
    out[i] = __float2bfloat16(s);
}
void rs(torch::Tensor ptrs, torch::Tensor out, int64_t world, int64_t rank) {
    long chunk = out.numel();
    rs_bf16<<<(chunk + 255) / 256, 256>>>((const unsigned long long*)ptrs.data_ptr(),
        (__nv_bfloat16*)out.data_ptr(), world, rank, chunk);
}
"""
_mod = load_inline("rs_ipc", "void rs(torch::Tensor, torch::Tensor, int64_t, int64_t);",
                   cuda_sources=SRC, functions=["rs"])
_ctx = {}


def _ipc_table(x):
    if "ptrs" in _ctx:
        return _ctx["inbuf"], _ctx["ptrs"]
    inbuf = torch.empty_like(x)
    err, h = cudart.cudaIpcGetMemHandle(inbuf.data_ptr())  # expect: rendezvous setup
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, bytes(h.reserved))  # expect: nccl_metadata setup
    ptrs = []
    for r, raw in enumerate(gathered):
        if r == dist.get_rank():
            ptrs.append(inbuf.data_ptr())
            continue
        hh = cudart.cudaIpcMemHandle_t()
        hh.reserved = raw
        err, p = cudart.cudaIpcOpenMemHandle(hh, cudart.cudaIpcMemLazyEnablePeerAccess)  # expect: rendezvous setup
        ptrs.append(int(p))
    _ctx["inbuf"], _ctx["ptrs"] = inbuf, torch.tensor(ptrs, dtype=torch.int64, device=x.device)
    return _ctx["inbuf"], _ctx["ptrs"]


def solution(x: torch.Tensor) -> torch.Tensor:
    world, rank = dist.get_world_size(), dist.get_rank()
    if not x.is_floating_point() or x.element_size() != 2:
        out = torch.empty(x.shape[0] // world, *x.shape[1:], dtype=x.dtype, device=x.device)
        dist.reduce_scatter_tensor(out, x)  # expect: nccl_payload fallback
        return out
    inbuf, ptrs = _ipc_table(x)
    inbuf.copy_(x)
    dist.barrier()  # expect: nccl_metadata hot
    out = torch.empty(x.shape[0] // world, *x.shape[1:], dtype=x.dtype, device=x.device)
    _mod.rs(ptrs, out, world, rank)
    dist.barrier()  # expect: nccl_metadata hot
    return out
