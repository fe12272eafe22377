import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>

void pull_rows(torch::Tensor dst, int64_t src_ptr, int64_t row_bytes, int64_t first_row, int64_t nrows) {
    auto stream = at::cuda::getCurrentCUDAStream();
    const char* src = reinterpret_cast<const char*>(src_ptr) + first_row * row_bytes;
    cudaMemcpyAsync(dst.data_ptr(), src, nrows * row_bytes, cudaMemcpyDeviceToDevice, stream);  // # expect: copy_engine unknown
}

void pull_rows_peer(torch::Tensor dst, int64_t src_ptr, int64_t src_dev, int64_t nbytes) {
    auto stream = at::cuda::getCurrentCUDAStream();
    cudaMemcpyPeerAsync(dst.data_ptr(), dst.get_device(), reinterpret_cast<void*>(src_ptr), (int)src_dev, nbytes, stream);  // # expect: copy_engine unknown
}
"""

_EXT = load_inline(name="gated_pull", cpp_sources=_SRC, functions=["pull_rows", "pull_rows_peer"], with_cuda=True)
_SYM = {}


def solution(x: torch.Tensor) -> torch.Tensor:
    rank = dist.get_rank()
    world = dist.get_world_size()
    if "hdl" not in _SYM:
        _SYM["buf"] = symm_mem.empty(x.shape, dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        _SYM["hdl"] = symm_mem.rendezvous(_SYM["buf"], dist.group.WORLD.group_name)  # expect: rendezvous setup
    buf, hdl = _SYM["buf"], _SYM["hdl"]
    buf.copy_(x)
    hdl.barrier()
    left = (rank - 1) % world
    row_bytes = x.shape[1] * x.element_size()
    halo = torch.empty((2, x.shape[1]), dtype=x.dtype, device=x.device)
    sparse = bool((x[-1].abs().amax() == 0).item())
    if sparse:
        _EXT.pull_rows(halo, hdl.buffer_ptrs[left], row_bytes, x.shape[0] - 2, 2)
    else:
        _EXT.pull_rows_peer(halo, hdl.buffer_ptrs[left], left, 2 * row_bytes)
    hdl.barrier()
    return torch.cat([halo, x[:-2]], dim=0)
