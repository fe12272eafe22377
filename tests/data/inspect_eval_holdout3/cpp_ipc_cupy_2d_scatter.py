import functools

import cupy as cp
import torch
import torch.distributed as dist
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>
#include <vector>

void scatter_cols(torch::Tensor src, std::vector<int64_t> peer_ptrs, int64_t rank, int64_t rows,
                  int64_t col_bytes, int64_t pitch) {
    auto stream = at::cuda::getCurrentCUDAStream();
    const char* s = static_cast<const char*>(src.data_ptr());
    for (int64_t p = 0; p < (int64_t)peer_ptrs.size(); ++p) {
        if (p == rank) {
            cudaMemcpy2DAsync(reinterpret_cast<char*>(peer_ptrs[rank]) + rank * col_bytes, pitch, s + p * col_bytes, pitch, col_bytes, rows, cudaMemcpyDeviceToDevice, stream);
            continue;
        }
        char* d = reinterpret_cast<char*>(peer_ptrs[p]) + rank * col_bytes;
        cudaMemcpy2DAsync(d, pitch, s + p * col_bytes, pitch, col_bytes, rows, cudaMemcpyDeviceToDevice, stream);  // # expect: copy_engine hot
    }
}
"""

_EXT = load_inline(name="ipc_scatter_cols", cpp_sources=_SRC, functions=["scatter_cols"], with_cuda=True)
_PTRS = {}


@functools.lru_cache(maxsize=None)
def _recv_buffer(rows: int, cols: int, dtype: torch.dtype) -> torch.Tensor:
    return torch.empty((rows, cols), dtype=dtype, device="cuda")


def _peer_ptrs(buf: torch.Tensor) -> list:
    key = buf.data_ptr()
    if key in _PTRS:
        return _PTRS[key]
    rank = dist.get_rank()
    handle = cp.cuda.runtime.ipcGetMemHandle(buf.data_ptr())  # expect: rendezvous setup
    handles = [None] * dist.get_world_size()
    dist.all_gather_object(handles, handle)  # expect: nccl_metadata setup
    ptrs = []
    for p, h in enumerate(handles):
        if p == rank:
            ptrs.append(buf.data_ptr())
        else:
            ptrs.append(cp.cuda.runtime.ipcOpenMemHandle(h))  # expect: rendezvous setup
    dist.barrier()  # expect: nccl_metadata setup
    _PTRS[key] = ptrs
    return ptrs


def solution(x: torch.Tensor) -> torch.Tensor:
    rank = dist.get_rank()
    world = dist.get_world_size()
    rows, cols = x.shape
    recv = _recv_buffer(rows, cols, x.dtype)
    ptrs = _peer_ptrs(recv)
    col_bytes = (cols // world) * x.element_size()
    dist.barrier()  # expect: nccl_metadata hot
    _EXT.scatter_cols(x.contiguous(), ptrs, rank, rows, col_bytes, cols * x.element_size())
    torch.cuda.synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    return recv.clone()
