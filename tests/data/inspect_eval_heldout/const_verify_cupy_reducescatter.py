"""Reduce-scatter with a CuPy RawKernel that reads every peer's symmetric buffer.
VERIFY and USE_CUSTOM are compile-time switches used during development."""
import cupy as cp
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

VERIFY = False
USE_CUSTOM = True

_SRC = r"""
#include <cuda_bf16.h>
extern "C" __global__ void rs_kernel(const long long* ptrs, __nv_bfloat16* out,
                                     long long shard, long long offset, int world) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= shard) return;
    float acc = 0.f;
    for (int r = 0; r < world; ++r)
        acc += __bfloat162float(((const __nv_bfloat16*)ptrs[r])[offset + i]);
    out[i] = __float2bfloat16(acc);
}
"""
_kernel = cp.RawKernel(_SRC, "rs_kernel")
_ws = {}


def _workspace(x: torch.Tensor):
    if x.numel() not in _ws:
        buf = symm_mem.empty(x.numel(), dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        hdl = symm_mem.rendezvous(buf, dist.group.WORLD.group_name)  # expect: rendezvous setup
        ptrs = cp.asarray(hdl.buffer_ptrs, dtype=cp.int64)
        _ws[x.numel()] = (buf, hdl, ptrs)
    return _ws[x.numel()]


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    rank, world = dist.get_rank(), dist.get_world_size()
    out = torch.empty((tensor.shape[0] // world, *tensor.shape[1:]), dtype=tensor.dtype, device=tensor.device)
    if not USE_CUSTOM:
        dist.reduce_scatter_tensor(out, tensor)  # expect: nccl_payload fallback
        return out

    buf, hdl, ptrs = _workspace(tensor)
    buf.copy_(tensor.reshape(-1))
    hdl.barrier(channel=0)
    shard = out.numel()
    with cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
        _kernel(((shard + 255) // 256,), (256,),
                (ptrs, out.data_ptr(), cp.int64(shard), cp.int64(rank * shard), cp.int32(world)))
    hdl.barrier(channel=1)

    if VERIFY:
        ref = torch.empty_like(out)
        dist.reduce_scatter_tensor(ref, tensor)  # expect: nccl_payload fallback
        torch.testing.assert_close(out, ref, atol=1e-1, rtol=2e-2)
    return out
