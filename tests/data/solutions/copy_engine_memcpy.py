import torch
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <cuda_runtime.h>
#include <torch/extension.h>
// host side: one copy-engine transfer per peer
void pull(torch::Tensor dst, int64_t src_ptr, int src_dev, int64_t n_bytes) {
    cudaMemcpyPeerAsync(dst.data_ptr(), dst.get_device(),
                        reinterpret_cast<void*>(src_ptr), src_dev, n_bytes, 0);
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("pull", &pull); }
"""

_ext = load_inline("pull_ext", cpp_sources="", cuda_sources=CPP)


def solution(x: torch.Tensor, src_ptr: int) -> torch.Tensor:
    out = torch.empty_like(x)
    _ext.pull(out, src_ptr, 1 - x.get_device(), x.numel() * x.element_size())
    return out
