"""All-reduce via a CUDA one-shot kernel on CUDA-IPC buffers, with a local self-test harness."""
import os

import cupy as cp
import torch
import torch.distributed as dist

_ar = cp.RawKernel(r"""
#include <cuda_bf16.h>
extern "C" __global__ void ar(const unsigned long long* p, __nv_bfloat16* o, int w, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) { float s = 0.f; for (int r = 0; r < w; ++r) s += __bfloat162float(((__nv_bfloat16*)p[r])[i]); o[i] = __float2bfloat16(s); }
}
""", "ar")
_S = {}


def _ipc(x):
    if "ptrs" not in _S:
        _S["in"] = torch.empty_like(x)
        hs = [None] * dist.get_world_size()
        dist.all_gather_object(hs, cp.cuda.runtime.ipcGetMemHandle(_S["in"].data_ptr()))  # expect: nccl_metadata setup; rendezvous setup
        me = dist.get_rank()
        _S["ptrs"] = cp.asarray([_S["in"].data_ptr() if r == me else cp.cuda.runtime.ipcOpenMemHandle(h)  # expect: rendezvous setup
                                 for r, h in enumerate(hs)], dtype=cp.uint64)
    return _S["in"], _S["ptrs"]


def solution(x: torch.Tensor) -> torch.Tensor:
    inbuf, ptrs = _ipc(x)
    inbuf.copy_(x)
    torch.cuda.synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    out = torch.empty_like(x)
    n = x.numel()
    _ar(((n + 255) // 256,), (256,), (ptrs, out.data_ptr(), cp.int32(dist.get_world_size()), cp.int64(n)))
    torch.cuda.synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    return out


if __name__ == "__main__":
    dist.init_process_group("nccl")  # expect: nccl_metadata fallback
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    t = torch.randn(1024, 1024, dtype=torch.bfloat16, device="cuda")
    ref = t.clone()
    dist.all_reduce(ref)  # expect: nccl_payload fallback
    print("max err", (solution(t) - ref).abs().max().item())
