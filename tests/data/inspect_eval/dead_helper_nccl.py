"""Two-shot all-reduce in CUDA over symmetric memory. `_reference_allreduce` kept for debugging."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline

CU = r"""
#include <torch/extension.h>
#include <cuda_bf16.h>
__global__ void reduce_chunk(const long* ptrs, int world, int rank, long chunk) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i >= chunk) return;
    float s = 0.f;
    for (int r = 0; r < world; ++r) s += __bfloat162float(((__nv_bfloat16*)ptrs[r])[rank * chunk + i]);
    for (int r = 0; r < world; ++r) ((__nv_bfloat16*)ptrs[r])[rank * chunk + i] = __float2bfloat16(s);
}
void two_shot(torch::Tensor ptrs, int64_t world, int64_t rank, int64_t chunk) {
    reduce_chunk<<<(chunk + 255) / 256, 256>>>(ptrs.data_ptr<long>(), world, rank, chunk);
}
"""
_mod = load_inline("two_shot_cu", "void two_shot(torch::Tensor, int64_t, int64_t, int64_t);",
                   cuda_sources=CU, functions=["two_shot"])
_cache = {}


def _reference_allreduce(x):
    y = x.clone()
    dist.all_reduce(y)  # expect: nccl_payload fallback
    return y


def _compare(x, out):
    ref = _reference_allreduce(x)
    return (ref - out).abs().max().item()


def solution(x: torch.Tensor) -> torch.Tensor:
    if "h" not in _cache:
        _cache["b"] = symm_mem.empty(x.numel(), dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        _cache["h"] = symm_mem.rendezvous(_cache["b"], dist.group.WORLD)  # expect: rendezvous setup
        _cache["p"] = torch.tensor(_cache["h"].buffer_ptrs, dtype=torch.long, device=x.device)
    b, h, p = _cache["b"], _cache["h"], _cache["p"]
    b.copy_(x.view(-1))
    dist.barrier()  # expect: nccl_metadata hot
    _mod.two_shot(p, h.world_size, h.rank, x.numel() // h.world_size)
    dist.barrier()  # expect: nccl_metadata hot
    return b.view_as(x).clone()
