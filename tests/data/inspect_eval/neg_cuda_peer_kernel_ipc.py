"""Reduce-scatter kernel that dereferences CUDA-IPC mapped peer pointers (no memcpy)."""
import cupy as cp
import torch
import torch.distributed as dist

_rs_kernel = cp.RawKernel(r"""
#include <cuda_bf16.h>
extern "C" __global__ void rs(const unsigned long long* ptrs, __nv_bfloat16* out, int world, int rank, long chunk) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i >= chunk) return;
    float acc = 0.f;
    for (int r = 0; r < world; ++r)
        acc += __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(ptrs[r])[rank * chunk + i]);
    out[i] = __float2bfloat16(acc);
}
""", "rs")
_ipc = None


def _ipc_setup(x):
    global _ipc
    if _ipc is None:
        inbox = torch.empty_like(x)
        h = cp.cuda.runtime.ipcGetMemHandle(inbox.data_ptr())  # expect: rendezvous setup
        hs = [None] * dist.get_world_size()
        dist.all_gather_object(hs, h)  # expect: nccl_metadata setup
        me = dist.get_rank()
        ptrs = []
        for r, hr in enumerate(hs):
            ptrs.append(inbox.data_ptr() if r == me else cp.cuda.runtime.ipcOpenMemHandle(hr))  # expect: rendezvous setup
        _ipc = (inbox, cp.asarray(ptrs, dtype=cp.uint64))
    return _ipc


def solution(x: torch.Tensor) -> torch.Tensor:
    inbox, ptrs = _ipc_setup(x)
    world, rank = dist.get_world_size(), dist.get_rank()
    inbox.copy_(x)
    torch.cuda.synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    chunk = x.numel() // world
    out = torch.empty(x.shape[0] // world, *x.shape[1:], dtype=x.dtype, device=x.device)
    _rs_kernel(((chunk + 255) // 256,), (256,), (ptrs, out.data_ptr(), cp.int32(world), cp.int32(rank), cp.int64(chunk)))
    torch.cuda.synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    return out
