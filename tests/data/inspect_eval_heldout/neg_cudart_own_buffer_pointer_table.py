"""All-reduce fused with a residual add. The input is staged into this rank's own
symmetric buffer with cudaMemcpyAsync, the pointer table is uploaded once, and a
single kernel sums the peer buffers through UVA loads."""
import numpy as np
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from cuda import cudart
from torch.utils.cpp_extension import load_inline

_KERNEL = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_bf16.h>
__global__ void ar_res(const int64_t* ptrs, const __nv_bfloat16* res, __nv_bfloat16* out, int64_t n, int world) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float acc = __bfloat162float(res[i]);
        for (int r = 0; r < world; ++r) acc += __bfloat162float(((const __nv_bfloat16*)ptrs[r])[i]);
        out[i] = __float2bfloat16(acc);
    }
}
void allreduce_residual(torch::Tensor ptrs, torch::Tensor res, torch::Tensor out, int64_t world) {
    ar_res<<<264, 512, 0, at::cuda::getCurrentCUDAStream()>>>(ptrs.data_ptr<int64_t>(),
        (const __nv_bfloat16*)res.data_ptr(), (__nv_bfloat16*)out.data_ptr(), out.numel(), (int)world);
}
"""
_ext = load_inline("pkb_ar_residual", cpp_sources="void allreduce_residual(torch::Tensor, torch::Tensor, torch::Tensor, int64_t);",
                   cuda_sources=_KERNEL, functions=["allreduce_residual"])


class _State:
    def __init__(self, x: torch.Tensor):
        self.buf = symm_mem.empty(x.shape, dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        self.hdl = symm_mem.rendezvous(self.buf, dist.group.WORLD.group_name)  # expect: rendezvous setup
        self.rank, self.world = self.hdl.rank, self.hdl.world_size
        host = np.asarray(self.hdl.buffer_ptrs, dtype=np.int64)
        self.d_ptrs = torch.empty(self.world, dtype=torch.int64, device=x.device)
        (err,) = cudart.cudaMemcpy(self.d_ptrs.data_ptr(), host.ctypes.data, host.nbytes,
                                   cudart.cudaMemcpyKind.cudaMemcpyHostToDevice)
        assert err == cudart.cudaError_t.cudaSuccess, err
        self._host = host


_STATE = None


@torch.no_grad()
def solution(tensor: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    global _STATE
    if _STATE is None:
        _STATE = _State(tensor)
    st = _STATE
    nbytes = tensor.numel() * tensor.element_size()
    stream = torch.cuda.current_stream().cuda_stream
    cudart.cudaMemcpyAsync(st.hdl.buffer_ptrs[st.rank], tensor.contiguous().data_ptr(), nbytes,
                           cudart.cudaMemcpyKind.cudaMemcpyDeviceToDevice, stream)
    st.hdl.barrier(channel=0)
    out = torch.empty_like(tensor)
    _ext.allreduce_residual(st.d_ptrs, residual.contiguous(), out, st.world)
    st.hdl.barrier(channel=1)
    return out
