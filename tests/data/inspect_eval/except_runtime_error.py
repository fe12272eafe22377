"""All-to-all: each rank pulls its column block from every peer with cudaMemcpyPeerAsync."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from cuda.bindings import runtime as cudart


def _check(res):
    err = res[0]
    if err != cudart.cudaError_t.cudaSuccess:
        raise RuntimeError(f"CUDA error {err}")
    return res[1:] if len(res) > 1 else None


_SYMM = {}


def _symm_for(x):
    key = (x.shape, x.dtype)
    if key not in _SYMM:
        t = symm_mem.empty(x.shape, dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        _SYMM[key] = (t, symm_mem.rendezvous(t, dist.group.WORLD))  # expect: rendezvous setup
    return _SYMM[key]


def solution(x: torch.Tensor) -> torch.Tensor:
    buf, hdl = _symm_for(x)
    rank, world = hdl.rank, hdl.world_size
    out = torch.empty_like(x)
    chunk_bytes = x.numel() * x.element_size() // world
    stream = torch.cuda.current_stream().cuda_stream
    try:
        buf.copy_(x)
        dist.barrier()  # expect: nccl_metadata hot
        for step in range(world):
            src = (rank + step) % world
            src_ptr = hdl.buffer_ptrs[src] + rank * chunk_bytes
            _check(cudart.cudaMemcpyPeerAsync(out.data_ptr() + src * chunk_bytes, rank,  # expect: copy_engine hot
                                              src_ptr, src, chunk_bytes, stream))
    except RuntimeError:
        torch.cuda.synchronize()
        dist.all_to_all_single(out, x)  # expect: nccl_payload fallback
    finally:
        torch.cuda.current_stream().synchronize()
        dist.barrier()  # expect: nccl_metadata hot
    return out
