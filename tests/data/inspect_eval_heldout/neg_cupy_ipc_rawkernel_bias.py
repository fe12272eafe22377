"""Row-parallel linear epilogue: all-reduce the partial outputs and add the bias.
Peers' staging buffers are opened once through CUDA IPC (CuPy); the reduction is a
RawKernel reading them directly. Only local device-to-device copies use memcpy."""
import cupy as cp
import torch
import torch.distributed as dist

_SRC = r"""
#include <cuda_bf16.h>
extern "C" __global__ void reduce_bias(const unsigned long long* ptrs, const __nv_bfloat16* bias,
                                       __nv_bfloat16* out, long long rows, long long cols, int world) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * cols) return;
    float acc = __bfloat162float(bias[i % cols]);
    for (int r = 0; r < world; ++r) acc += __bfloat162float(((const __nv_bfloat16*)ptrs[r])[i]);
    out[i] = __float2bfloat16(acc);
}
"""
_kernel = cp.RawKernel(_SRC, "reduce_bias")
_ipc = {}


def _open(x: torch.Tensor):
    if "ptrs" not in _ipc:
        rt = cp.cuda.runtime
        staging = torch.empty_like(x)
        handle = rt.ipcGetMemHandle(staging.data_ptr())  # expect: rendezvous setup
        gathered = [None] * dist.get_world_size()
        dist.all_gather_object(gathered, handle)  # expect: nccl_metadata setup
        me = dist.get_rank()
        ptrs = [staging.data_ptr() if r == me else rt.ipcOpenMemHandle(h, rt.cudaIpcMemLazyEnablePeerAccess)  # expect: rendezvous setup
                for r, h in enumerate(gathered)]
        _ipc.update(staging=staging, ptrs=cp.asarray(ptrs, dtype=cp.uint64))
    return _ipc["staging"], _ipc["ptrs"]


@torch.no_grad()
def solution(partial: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    staging, ptrs = _open(partial)
    nbytes = partial.numel() * partial.element_size()
    stream = cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
    cp.cuda.runtime.memcpyAsync(staging.data_ptr(), partial.contiguous().data_ptr(), nbytes,
                                cp.cuda.runtime.memcpyDeviceToDevice, stream.ptr)
    stream.synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    rows, cols = partial.shape
    out = torch.empty_like(partial)
    bias_row = bias.reshape(-1)[:cols].contiguous()
    with stream:
        _kernel(((rows * cols + 511) // 512,), (512,),
                (ptrs, bias_row.data_ptr(), out.data_ptr(), cp.int64(rows), cp.int64(cols), cp.int32(ptrs.size)))
    stream.synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    return out
