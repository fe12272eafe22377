"""All-gather via CUDA IPC + copy engine (cupy), bf16 only."""
import cupy as cp
import torch
import torch.distributed as dist

_peer_ptrs = None
_staging = None


def _exchange(x):
    global _peer_ptrs, _staging
    if _peer_ptrs is not None:
        return
    _staging = torch.empty_like(x)
    handle = cp.cuda.runtime.ipcGetMemHandle(_staging.data_ptr())  # expect: rendezvous setup
    handles = [None] * dist.get_world_size()
    dist.all_gather_object(handles, handle)  # expect: nccl_metadata setup
    rank = dist.get_rank()
    ptrs = []
    for r, h in enumerate(handles):
        if r == rank:
            ptrs.append(_staging.data_ptr())
        else:
            ptrs.append(cp.cuda.runtime.ipcOpenMemHandle(h))  # expect: rendezvous setup
    _peer_ptrs = ptrs


def solution(x: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    if x.dtype != torch.bfloat16:
        parts = [torch.empty_like(x) for _ in range(world)]
        dist.all_gather(parts, x)  # expect: nccl_payload fallback
        return torch.cat(parts, dim=0)

    _exchange(x)
    rank = dist.get_rank()
    _staging.copy_(x)
    torch.cuda.current_stream().synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    out = torch.empty((world,) + tuple(x.shape), dtype=x.dtype, device=x.device)
    stream = torch.cuda.current_stream().cuda_stream
    nbytes = x.numel() * x.element_size()
    dev = x.device.index
    for src in range(world):
        dst_ptr = out[src].data_ptr()
        if src == rank:
            cp.cuda.runtime.memcpyAsync(dst_ptr, x.data_ptr(), nbytes, cp.cuda.runtime.memcpyDeviceToDevice, stream)
        else:
            cp.cuda.runtime.memcpyPeerAsync(dst_ptr, dev, _peer_ptrs[src], src, nbytes, stream)  # expect: copy_engine hot
    torch.cuda.current_stream().synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    return out.reshape(world * x.shape[0], *x.shape[1:])
