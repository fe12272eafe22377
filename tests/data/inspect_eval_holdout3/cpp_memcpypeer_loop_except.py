import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>
#include <vector>

void push_to_all(torch::Tensor x, std::vector<int64_t> ptrs, int64_t rank, int64_t slot_bytes) {
    auto stream = at::cuda::getCurrentCUDAStream();
    int me = x.get_device();
    const char* src = static_cast<const char*>(x.data_ptr());
    int world = (int)ptrs.size();
    for (int off = 1; off < world; ++off) {
        int p = (int)((rank + off) % world);
        char* dst = reinterpret_cast<char*>(ptrs[p]) + rank * slot_bytes;
        cudaMemcpyPeerAsync(dst, p, src + p * slot_bytes, me, slot_bytes, stream);  // # expect: copy_engine hot
    }
    char* own = reinterpret_cast<char*>(ptrs[rank]) + rank * slot_bytes;
    cudaMemcpyAsync(own, src + rank * slot_bytes, slot_bytes, cudaMemcpyDeviceToDevice, stream);
}
"""

_EXT = load_inline(name="peer_push_a2a", cpp_sources=_SRC, functions=["push_to_all"], with_cuda=True)
_STATE = {}


def _handle(x: torch.Tensor):
    if x.shape not in _STATE:
        buf = symm_mem.empty(x.shape, dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        _STATE[x.shape] = (buf, symm_mem.rendezvous(buf, dist.group.WORLD.group_name))  # expect: rendezvous setup
    return _STATE[x.shape]


def solution(x: torch.Tensor) -> torch.Tensor:
    rank = dist.get_rank()
    world = dist.get_world_size()
    slot_bytes = x.numel() // world * x.element_size()
    try:
        buf, hdl = _handle(x)
        hdl.barrier()
        _EXT.push_to_all(x.contiguous(), hdl.buffer_ptrs, rank, slot_bytes)
        hdl.barrier()
        return buf.clone()
    except RuntimeError:
        out = torch.empty_like(x)
        dist.all_to_all_single(out, x.contiguous())  # expect: nccl_payload fallback
        dist.barrier()  # expect: nccl_metadata fallback
        return out
