import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>

void copy_tensor(torch::Tensor dst, torch::Tensor src) {
    auto stream = at::cuda::getCurrentCUDAStream();
    cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), src.numel() * src.element_size(), cudaMemcpyDeviceToDevice, stream);  // # expect: copy_engine hot
}

void stage(torch::Tensor dst, torch::Tensor src) {
    auto stream = at::cuda::getCurrentCUDAStream();
    cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), src.numel() * src.element_size(), cudaMemcpyDeviceToDevice, stream);
}
"""

_EXT = load_inline(name="tensor_ce_copy", cpp_sources=_SRC, functions=["copy_tensor", "stage"], with_cuda=True)


class _Sym:
    buf = None
    hdl = None


def solution(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    rank = dist.get_rank()
    world = dist.get_world_size()
    if _Sym.hdl is None:
        _Sym.buf = symm_mem.empty(x.shape, dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        _Sym.hdl = symm_mem.rendezvous(_Sym.buf, dist.group.WORLD.group_name)  # expect: rendezvous setup
    hdl = _Sym.hdl
    mine = hdl.get_buffer(rank, tuple(x.shape), x.dtype)
    _EXT.stage(mine, x.contiguous())
    hdl.barrier()
    # tensor-parallel all-gather of activations, then one GEMM
    full = torch.empty((world,) + tuple(x.shape), dtype=x.dtype, device=x.device)
    full[rank].copy_(x)
    for p in range(world):
        if p != rank:
            _EXT.copy_tensor(full[p], hdl.get_buffer(p, tuple(x.shape), x.dtype))
    hdl.barrier()
    return full.view(-1, x.shape[1]) @ w.t()
