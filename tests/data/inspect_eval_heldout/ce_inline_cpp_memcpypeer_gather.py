"""All-gather driven from C++: one extension call issues cudaMemcpyPeerAsync for
every peer shard (read out of the peers' symmetric buffers) on the current stream."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline

_CPP = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

void peer_gather(torch::Tensor out, std::vector<int64_t> ptrs, std::vector<int64_t> devs,
                 int64_t rank, torch::Tensor local) {
    auto stream = c10::cuda::getCurrentCUDAStream().stream();
    const size_t nbytes = local.numel() * local.element_size();
    char* dst = static_cast<char*>(out.data_ptr());
    int my_dev = out.get_device();
    for (size_t r = 0; r < ptrs.size(); ++r) {
        if ((int64_t)r == rank) {
            cudaMemcpyAsync(dst + r * nbytes, local.data_ptr(), nbytes, cudaMemcpyDeviceToDevice, stream);
            continue;
        }
        cudaError_t e = cudaMemcpyPeerAsync(dst + r * nbytes, my_dev, reinterpret_cast<void*>(ptrs[r]),  // # expect: copy_engine hot
                                            (int)devs[r], nbytes, stream);
        TORCH_CHECK(e == cudaSuccess, "cudaMemcpyPeerAsync: ", cudaGetErrorString(e));
    }
}
"""
_ext = load_inline("pkb_peer_gather", cpp_sources=_CPP, functions=["peer_gather"],
                   extra_ldflags=["-lcudart"], with_cuda=True)
_state = {}


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    x = tensor.contiguous()
    if "hdl" not in _state:
        buf = symm_mem.empty(x.shape, dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        hdl = symm_mem.rendezvous(buf, dist.group.WORLD.group_name)  # expect: rendezvous setup
        devs = [None] * hdl.world_size
        dist.all_gather_object(devs, torch.cuda.current_device())  # expect: nccl_metadata setup
        _state.update(buf=buf, hdl=hdl, devs=devs, ptrs=list(hdl.buffer_ptrs))
    buf, hdl = _state["buf"], _state["hdl"]
    buf.copy_(x)
    hdl.barrier(channel=0)
    out = x.new_empty((hdl.world_size * x.shape[0], *x.shape[1:]))
    _ext.peer_gather(out, _state["ptrs"], _state["devs"], hdl.rank, x)
    hdl.barrier(channel=1)
    return out
