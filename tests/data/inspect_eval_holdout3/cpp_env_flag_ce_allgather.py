import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline

_USE_CE = os.environ.get("PKB_CE_ALLGATHER", "0") == "1"

_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>
#include <vector>

void ce_all_gather(torch::Tensor out, std::vector<int64_t> ptrs, int64_t nbytes) {
    auto stream = at::cuda::getCurrentCUDAStream();
    char* o = static_cast<char*>(out.data_ptr());
    for (size_t p = 0; p < ptrs.size(); ++p) {
        cudaMemcpyAsync(o + p * nbytes, reinterpret_cast<void*>(ptrs[p]), nbytes, cudaMemcpyDeviceToDevice, stream);  // # expect: copy_engine fallback
    }
}
"""

_EXT = load_inline(name="ce_allgather_env", cpp_sources=_SRC, functions=["ce_all_gather"], with_cuda=True)
_CACHE = {}


def _ce_path(x: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    if "hdl" not in _CACHE:
        _CACHE["buf"] = symm_mem.empty(x.numel(), dtype=x.dtype, device=x.device)  # expect: rendezvous fallback
        _CACHE["hdl"] = symm_mem.rendezvous(_CACHE["buf"], dist.group.WORLD.group_name)  # expect: rendezvous fallback
    _CACHE["buf"].copy_(x.flatten())
    _CACHE["hdl"].barrier()
    out = torch.empty((world * x.shape[0], x.shape[1]), dtype=x.dtype, device=x.device)
    _EXT.ce_all_gather(out, _CACHE["hdl"].buffer_ptrs, x.numel() * x.element_size())
    _CACHE["hdl"].barrier()
    return out


def solution(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    if _USE_CE:
        full = _ce_path(x)
    else:
        full = torch.empty((dist.get_world_size() * x.shape[0], x.shape[1]), dtype=x.dtype, device=x.device)
        dist.all_gather_into_tensor(full, x)  # expect: nccl_payload hot
    return full @ w.t()
