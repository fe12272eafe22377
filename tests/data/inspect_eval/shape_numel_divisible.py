"""Multimem (NVLS) all-reduce: one ld_reduce + st per 16 bytes, needs numel % (8 * world) == 0."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <torch/extension.h>
__global__ void mc_allreduce(uint64_t mc_ptr, long n_vec, int rank, int world) {
    long per = n_vec / world;
    for (long i = rank * per + blockIdx.x * blockDim.x + threadIdx.x; i < (rank + 1) * per;
         i += (long)gridDim.x * blockDim.x) {
        uint4 v;
        uint64_t addr = mc_ptr + i * 16;
        asm volatile("multimem.ld_reduce.relaxed.sys.global.add.v4.bf16x2 {%0,%1,%2,%3}, [%4];"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(addr) : "memory");
        asm volatile("multimem.st.relaxed.sys.global.v4.f32 [%0], {%1,%2,%3,%4};"
                     :: "l"(addr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
    }
}
void launch(int64_t mc_ptr, int64_t n_vec, int64_t rank, int64_t world) {
    mc_allreduce<<<132, 512>>>((uint64_t)mc_ptr, n_vec, (int)rank, (int)world);
}
"""
_ext = load_inline("mc_ar", "void launch(int64_t, int64_t, int64_t, int64_t);", cuda_sources=SRC,
                   functions=["launch"], extra_cuda_cflags=["-arch=sm_90a"])
_cache = {}


def solution(tensor: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    n = tensor.numel()
    if n % (8 * world) != 0:
        out = tensor.clone()
        dist.all_reduce(out)  # expect: nccl_payload fallback
        return out
    if n not in _cache:
        buf = symm_mem.empty(n, dtype=tensor.dtype, device=tensor.device)  # expect: rendezvous setup
        _cache[n] = (buf, symm_mem.rendezvous(buf, dist.group.WORLD.group_name))  # expect: rendezvous setup
    buf, hdl = _cache[n]
    buf.copy_(tensor.view(-1))
    dist.barrier()  # expect: nccl_metadata hot
    _ext.launch(hdl.multicast_ptr, n // 8, hdl.rank, world)
    dist.barrier()  # expect: nccl_metadata hot
    return buf.view_as(tensor).clone()
