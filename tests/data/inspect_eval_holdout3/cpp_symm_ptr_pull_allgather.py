import functools

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>

void pull_slot(torch::Tensor out, int64_t peer_ptr, int64_t slot, int64_t nbytes) {
    auto stream = at::cuda::getCurrentCUDAStream();
    char* dst = static_cast<char*>(out.data_ptr()) + slot * nbytes;
    cudaMemcpyAsync(dst, reinterpret_cast<const void*>(peer_ptr), nbytes, cudaMemcpyDeviceToDevice, stream);  // # expect: copy_engine hot
}

void clear(torch::Tensor out) {
    auto stream = at::cuda::getCurrentCUDAStream();
    cudaMemsetAsync(out.data_ptr(), 0, out.numel() * out.element_size(), stream);
}
"""

_EXT = load_inline(name="symm_pull_slot", cpp_sources=_SRC, functions=["pull_slot", "clear"], with_cuda=True)


@functools.lru_cache(maxsize=None)
def _symm(numel: int, dtype: torch.dtype):
    dev = torch.device("cuda", torch.cuda.current_device())
    buf = symm_mem.empty(numel, dtype=dtype, device=dev)  # expect: rendezvous setup
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD.group_name)  # expect: rendezvous setup
    return buf, hdl


def solution(x: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    buf, hdl = _symm(x.numel(), x.dtype)
    buf.copy_(x.flatten())
    hdl.barrier()
    out = torch.empty((world * x.shape[0], x.shape[1]), dtype=x.dtype, device=x.device)
    _EXT.clear(out)
    nbytes = x.numel() * x.element_size()
    for p in range(world):
        _EXT.pull_slot(out, hdl.buffer_ptrs[p], p, nbytes)
    hdl.barrier()
    return out
