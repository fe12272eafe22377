"""All-gather where the host code of a load_inline extension issues one cudaMemcpyPeerAsync per peer."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline

_CPP = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>
void pull_all(torch::Tensor out, std::vector<int64_t> peer_ptrs, int64_t rank) {
    auto stream = c10::cuda::getCurrentCUDAStream();
    const int world = (int)peer_ptrs.size();
    const size_t bytes = out.nbytes() / world;
    char* dst = reinterpret_cast<char*>(out.data_ptr());
    for (int r = 0; r < world; ++r) {
        cudaMemcpyPeerAsync(dst + r * bytes, (int)rank, reinterpret_cast<void*>(peer_ptrs[r]), r, bytes, stream);  // # expect: copy_engine hot
    }
}
"""
_ext = load_inline("pull_all_ext", cpp_sources=_CPP, functions=["pull_all"],
                   extra_ldflags=["-lcudart"], with_cuda=True)
_symm = {}


def _buffer(x):
    if x.numel() not in _symm:
        b = symm_mem.empty(x.numel(), dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        _symm[x.numel()] = (b, symm_mem.rendezvous(b, dist.group.WORLD))  # expect: rendezvous setup
    return _symm[x.numel()]


@torch.no_grad()
def solution(x: torch.Tensor) -> torch.Tensor:
    buf, hdl = _buffer(x)
    buf.copy_(x.view(-1))
    torch.cuda.current_stream().synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    out = torch.empty(hdl.world_size * x.shape[0], *x.shape[1:], dtype=x.dtype, device=x.device)
    _ext.pull_all(out, list(hdl.buffer_ptrs), hdl.rank)
    torch.cuda.current_stream().synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    return out
