import torch
import torch.distributed as dist
from torch.utils.cpp_extension import load_inline

HANDLE_BYTES = 64

_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>
#include <cstring>
#include <unordered_map>

void export_handle(torch::Tensor buf, torch::Tensor handle_out) {
    cudaIpcMemHandle_t h;
    cudaIpcGetMemHandle(&h, buf.data_ptr());
    std::memcpy(handle_out.data_ptr(), &h, sizeof(h));
}

void pull_from(torch::Tensor dst, torch::Tensor handles, int64_t peer, int64_t offset_bytes, int64_t nbytes) {
    static std::unordered_map<int64_t, void*> opened;
    auto stream = at::cuda::getCurrentCUDAStream();
    auto it = opened.find(peer);
    if (it == opened.end()) {
        cudaIpcMemHandle_t h;
        std::memcpy(&h, handles[peer].data_ptr(), sizeof(h));
        void* p = nullptr;
        cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess);
        it = opened.emplace(peer, p).first;
    }
    const char* src = static_cast<const char*>(it->second) + offset_bytes;
    cudaMemcpyAsync(dst.data_ptr(), src, nbytes, cudaMemcpyDeviceToDevice, stream);  // # expect: copy_engine hot
}
"""

_EXT = load_inline(name="ipc_open_cpp", cpp_sources=_SRC, functions=["export_handle", "pull_from"], with_cuda=True)
_S = {}


def _setup(x: torch.Tensor) -> dict:
    if "buf" in _S:
        return _S
    world = dist.get_world_size()
    buf = torch.empty_like(x)
    h = torch.empty(HANDLE_BYTES, dtype=torch.uint8)
    _EXT.export_handle(buf, h)
    all_h = torch.empty(world * HANDLE_BYTES, dtype=torch.uint8, device=x.device)
    dist.all_gather_into_tensor(all_h, h.cuda())  # expect: nccl_metadata setup
    _S["buf"] = buf
    _S["handles"] = all_h.view(world, HANDLE_BYTES).cpu()
    return _S


def solution(x: torch.Tensor) -> torch.Tensor:
    rank = dist.get_rank()
    world = dist.get_world_size()
    st = _setup(x)
    st["buf"].copy_(x)
    dist.barrier()  # expect: nccl_metadata hot
    out = torch.empty((world,) + tuple(x.shape), dtype=x.dtype, device=x.device)
    nbytes = x.numel() * x.element_size()
    out[rank].copy_(x)
    for p in range(world):
        if p == rank:
            continue
        _EXT.pull_from(out[p], st["handles"], p, 0, nbytes)
    torch.cuda.current_stream().synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    return out.sum(dim=0)
