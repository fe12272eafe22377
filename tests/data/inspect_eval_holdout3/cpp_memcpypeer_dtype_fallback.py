import functools

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>
#include <vector>

void gather_peers(torch::Tensor out, std::vector<int64_t> ptrs, int64_t rank, int64_t nbytes) {
    auto stream = at::cuda::getCurrentCUDAStream();
    int dev = out.get_device();
    char* o = static_cast<char*>(out.data_ptr());
    for (int64_t p = 0; p < (int64_t)ptrs.size(); ++p) {
        if (p == rank) continue;
        cudaMemcpyPeerAsync(o + p * nbytes, dev, reinterpret_cast<void*>(ptrs[p]), (int)p, nbytes, stream);  // # expect: copy_engine fallback
    }
    cudaMemcpyAsync(o + rank * nbytes, reinterpret_cast<void*>(ptrs[rank]), nbytes, cudaMemcpyDeviceToDevice, stream);
}
"""


@functools.cache
def _ext():
    return load_inline(name="peer_gather_fp32", cpp_sources=_SRC, functions=["gather_peers"], with_cuda=True)


@functools.cache
def _symm(numel: int):
    buf = symm_mem.empty(numel, dtype=torch.float32, device="cuda")  # expect: rendezvous fallback
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD.group_name)  # expect: rendezvous fallback
    return buf, hdl


def _gather_fp32_ce(x: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    buf, hdl = _symm(x.numel())
    buf.copy_(x.flatten())
    hdl.barrier()
    out = torch.empty((world * x.shape[0], x.shape[1]), dtype=x.dtype, device=x.device)
    _ext().gather_peers(out, hdl.buffer_ptrs, dist.get_rank(), x.numel() * 4)
    hdl.barrier()
    return out


def solution(x: torch.Tensor) -> torch.Tensor:
    if x.dtype == torch.float32:
        return _gather_fp32_ce(x)
    world = dist.get_world_size()
    out = torch.empty((world * x.shape[0], x.shape[1]), dtype=x.dtype, device=x.device)
    dist.all_gather_into_tensor(out, x.contiguous())  # expect: nccl_payload hot
    return out
