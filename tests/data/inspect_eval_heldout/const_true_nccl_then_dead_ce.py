"""All-gather. A copy-engine version (cudaMemcpyPeerAsync over CUDA IPC) exists, but
on H100/H200 NCCL was faster for 2 MiB bf16 shards, so bf16 is routed to NCCL."""
import torch
import torch.distributed as dist
from cuda import cudart

_NCCL_FOR_BF16 = True
_ipc = None


def _ipc_state(x: torch.Tensor):
    global _ipc
    if _ipc is None:
        rank, world = dist.get_rank(), dist.get_world_size()
        buf = torch.empty_like(x)
        err, h = cudart.cudaIpcGetMemHandle(buf.data_ptr())  # expect: rendezvous fallback
        handles = [None] * world
        dist.all_gather_object(handles, (torch.cuda.current_device(), bytes(h.reserved)))  # expect: nccl_metadata fallback
        peers = []
        for r, (dev, raw) in enumerate(handles):
            if r == rank:
                peers.append((dev, buf.data_ptr()))
                continue
            ph = cudart.cudaIpcMemHandle_t()
            ph.reserved = raw
            err, ptr = cudart.cudaIpcOpenMemHandle(ph, cudart.cudaIpcMemLazyEnablePeerAccess)  # expect: rendezvous fallback
            peers.append((dev, ptr))
        _ipc = (buf, peers)
    return _ipc


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    x = tensor.contiguous()
    out = x.new_empty((world * x.shape[0], *x.shape[1:]))
    if _NCCL_FOR_BF16 and x.dtype == torch.bfloat16:
        dist.all_gather_into_tensor(out, x)  # expect: nccl_payload hot
        return out

    buf, peers = _ipc_state(x)
    buf.copy_(x)
    torch.cuda.synchronize()
    dist.barrier()  # expect: nccl_metadata fallback
    nbytes = x.numel() * x.element_size()
    me = torch.cuda.current_device()
    stream = torch.cuda.current_stream().cuda_stream
    for r, (dev, ptr) in enumerate(peers):
        cudart.cudaMemcpyPeerAsync(out.data_ptr() + r * nbytes, me, ptr, dev, nbytes, stream)  # expect: copy_engine fallback
    torch.cuda.synchronize()
    dist.barrier()  # expect: nccl_metadata fallback
    return out
