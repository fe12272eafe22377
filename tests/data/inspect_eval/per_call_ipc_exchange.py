"""All-to-all through CUDA IPC, re-exchanging handles on every call (no caching)."""
import cupy as cp
import torch
import torch.distributed as dist


@torch.no_grad()
def solution(x: torch.Tensor) -> torch.Tensor:
    rank, world = dist.get_rank(), dist.get_world_size()
    send = x.contiguous()
    handle = cp.cuda.runtime.ipcGetMemHandle(send.data_ptr())  # expect: rendezvous hot
    table = [None] * world
    dist.all_gather_object(table, handle)  # expect: nccl_metadata hot
    out = torch.empty_like(x)
    blk = x.nbytes // world
    opened = []
    for src in range(world):
        if src == rank:
            cp.cuda.runtime.memcpy(out.data_ptr() + src * blk, send.data_ptr() + rank * blk, blk,
                                   cp.cuda.runtime.memcpyDeviceToDevice)
            continue
        base = cp.cuda.runtime.ipcOpenMemHandle(table[src])  # expect: rendezvous hot
        opened.append(base)
        cp.cuda.runtime.memcpy(out.data_ptr() + src * blk, base + rank * blk, blk,  # expect: copy_engine hot
                               cp.cuda.runtime.memcpyDeviceToDevice)
    for base in opened:
        cp.cuda.runtime.ipcCloseMemHandle(base)
    dist.barrier()  # expect: nccl_metadata hot
    return out
