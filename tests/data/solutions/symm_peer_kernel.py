"""Peer loads through a symmetric-memory UVA pointer, rendezvous cached."""

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <torch/extension.h>
__global__ void add_peer(const float* __restrict__ mine, const float* __restrict__ remote,
                         float* out, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = mine[i] + remote[i];
}
void launch(torch::Tensor mine, int64_t remote, torch::Tensor out) {
    int64_t n = mine.numel();
    int threads = 256;
    int blocks = (int)((n + threads - 1) / threads);
    add_peer<<<blocks, threads>>>(mine.data_ptr<float>(), (const float*)remote,
                                  out.data_ptr<float>(), n);
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("launch", &launch); }
"""

_ext = None
_symm = None


def _setup(n, device):
    global _ext, _symm
    if _symm is not None:
        return _symm
    _ext = load_inline("add_peer_ext", cpp_sources="", cuda_sources=SRC)
    buf = symm_mem.empty(n, device=device)
    _symm = (buf, symm_mem.rendezvous(buf, dist.group.WORLD))
    return _symm


def solution(x: torch.Tensor) -> torch.Tensor:
    buf, hdl = _setup(x.numel(), x.device)
    buf.copy_(x.view(-1))
    hdl.barrier(channel=0)
    out = torch.empty_like(x)
    _ext.launch(buf, int(hdl.buffer_ptrs[1 - hdl.rank]), out)
    return out
