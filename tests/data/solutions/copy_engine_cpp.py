"""Copies inside C++ (issue 32): a cudaMemcpy* in load_inline C++ is a copy-engine peer copy
when a pointer Python passes from a peer reaches it (`// peer copy`); this rank's own entry,
local tensors and a pointer-table upload are local copies."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

static void copy_bytes(void* dst, const void* src, size_t n, cudaStream_t s) {
    cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, s);  // peer copy
}

void ring_tail(int64_t next_ptr, torch::Tensor local, int64_t off) {
    auto s = c10::cuda::getCurrentCUDAStream().stream();
    char* dst = reinterpret_cast<char*>(next_ptr) + off;
    cudaMemcpyAsync(dst, local.data_ptr(), local.nbytes(), cudaMemcpyDefault, s);  // peer copy
}

void gather(torch::Tensor out, std::vector<int64_t> peer_ptrs, int64_t rank, int64_t n) {
    auto s = c10::cuda::getCurrentCUDAStream().stream();
    char* base = static_cast<char*>(out.data_ptr());
    cudaMemcpyAsync(base + rank * n, (void*)peer_ptrs[rank], n, cudaMemcpyDefault, s);
    for (int64_t r = 0; r < (int64_t)peer_ptrs.size(); ++r) {
        if (r == rank) continue;
        cudaMemcpyAsync(base + r * n, (void*)peer_ptrs[r], n, cudaMemcpyDefault, s);  // peer copy
    }
}

void stage(torch::Tensor dst, torch::Tensor src, torch::Tensor peer_table) {
    auto s = c10::cuda::getCurrentCUDAStream().stream();
    cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), src.nbytes(), cudaMemcpyDeviceToDevice, s);
    std::vector<int64_t> host(peer_table.numel());
    cudaMemcpy(peer_table.data_ptr(), host.data(), host.size() * 8, cudaMemcpyHostToDevice);
}

void pull(torch::Tensor dst, torch::Tensor remote_buf) {
    copy_bytes(dst.data_ptr(), remote_buf.data_ptr(), dst.nbytes(), nullptr);
}

void open_and_pull(torch::Tensor dst, torch::Tensor handle) {
    void* opened = nullptr;
    cudaIpcMemHandle_t h;
    memcpy(&h, handle.data_ptr(), sizeof(h));
    cudaIpcOpenMemHandle(&opened, h, cudaIpcMemLazyEnablePeerAccess);
    cudaMemcpy2DAsync(dst.data_ptr(), 256, opened, 256, 256, 8, cudaMemcpyDefault, 0);  // peer copy
}
"""
_ext = load_inline("cpp_copies", cpp_sources=_SRC,
                   functions=["ring_tail", "gather", "stage", "pull", "open_and_pull"])
_state = {}


def solution(x: torch.Tensor) -> torch.Tensor:
    if "hdl" not in _state:
        buf = symm_mem.empty(x.shape, dtype=x.dtype, device=x.device)
        hdl = symm_mem.rendezvous(buf, dist.group.WORLD.group_name)
        _state.update(buf=buf, hdl=hdl, ptrs=list(hdl.buffer_ptrs))
    hdl = _state["hdl"]
    nxt = (hdl.rank + 1) % hdl.world_size
    _ext.ring_tail(hdl.buffer_ptrs[nxt], x, 0)
    out = torch.empty(hdl.world_size * x.numel(), dtype=x.dtype, device=x.device)
    _ext.gather(out, _state["ptrs"], hdl.rank, x.nbytes)
    table = torch.tensor(hdl.buffer_ptrs, dtype=torch.int64, device=x.device)
    _ext.stage(out, x, table)
    _ext.pull(out, hdl.get_buffer(nxt, x.shape, x.dtype))
    _ext.open_and_pull(out, x)
    return out
