"""All-gather: copy-engine pulls via cudaMemcpyPeerAsync, with several safety nets."""
import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from cuda import cudart

_TRACE = os.environ.get("AG_TRACE", "0") == "1"
_HDL = None


def _handle(x):
    global _HDL
    if _HDL is None:
        buf = symm_mem.empty(x.numel(), dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        _HDL = (buf, symm_mem.rendezvous(buf, dist.group.WORLD))  # expect: rendezvous setup
        dist.barrier()  # expect: nccl_metadata setup
    return _HDL


def _nccl(x, world):
    out = torch.empty(world * x.shape[0], *x.shape[1:], dtype=x.dtype, device=x.device)
    dist.all_gather_into_tensor(out, x)  # expect: nccl_payload fallback
    return out


def solution(x: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    if x.dtype not in (torch.bfloat16, torch.float16) or not x.is_contiguous():
        return _nccl(x, world)
    buf, hdl = _handle(x)
    buf.copy_(x.view(-1))
    dist.barrier()  # expect: nccl_metadata hot
    out = torch.empty(world, x.numel(), dtype=x.dtype, device=x.device)
    stream = torch.cuda.current_stream().cuda_stream
    try:
        for r in range(world):
            err, = cudart.cudaMemcpyPeerAsync(out[r].data_ptr(), hdl.rank, hdl.buffer_ptrs[r], r, x.nbytes, stream)  # expect: copy_engine hot
            if err != cudart.cudaError_t.cudaSuccess:
                raise RuntimeError(err)
    except RuntimeError:
        dist.monitored_barrier()  # expect: nccl_metadata fallback
        return _nccl(x, world)
    if _TRACE:
        dist.barrier()  # expect: nccl_metadata fallback
        print(f"rank {hdl.rank}: gathered {out.shape}")
    cudart.cudaStreamSynchronize(stream)
    dist.barrier()  # expect: nccl_metadata hot
    if out.isnan().any():
        dist.all_gather_into_tensor(out.view(-1), x.view(-1))  # expect: nccl_payload unknown
    return out.view(world * x.shape[0], *x.shape[1:])
