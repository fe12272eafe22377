"""Copy-engine all-gather over CUDA IPC (CuPy), handles exchanged once."""
from functools import lru_cache

import cupy as cp
import torch
import torch.distributed as dist


@lru_cache(maxsize=8)
def _ipc_buffers(numel: int, dtype: torch.dtype, dev: int):
    local = torch.empty(numel, dtype=dtype, device=f"cuda:{dev}")
    my_handle = cp.cuda.runtime.ipcGetMemHandle(local.data_ptr())  # expect: rendezvous setup
    handles = [None] * dist.get_world_size()
    dist.all_gather_object(handles, my_handle)  # expect: nccl_metadata setup
    rank = dist.get_rank()
    peers = {}
    for r, h in enumerate(handles):
        if r != rank:
            peers[r] = cp.cuda.runtime.ipcOpenMemHandle(h, cp.cuda.runtime.cudaIpcMemLazyEnablePeerAccess)  # expect: rendezvous setup
    return local, peers


def solution(x: torch.Tensor) -> torch.Tensor:
    world, rank = dist.get_world_size(), dist.get_rank()
    local, peers = _ipc_buffers(x.numel(), x.dtype, x.device.index)
    local.copy_(x.view(-1))
    torch.cuda.current_stream().synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    out = torch.empty((world, x.numel()), dtype=x.dtype, device=x.device)
    out[rank].copy_(local)
    stream = cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
    with stream:
        for r, ptr in peers.items():
            cp.cuda.runtime.memcpyPeerAsync(out[r].data_ptr(), rank, ptr, r, x.nbytes, stream.ptr)  # expect: copy_engine hot
    stream.synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    return out.view(-1, *x.shape[1:])
