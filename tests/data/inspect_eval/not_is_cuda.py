"""Broadcast from rank 0 via CUDA IPC: non-root ranks pull with cudaMemcpyAsync from root's pointer."""
from cuda.bindings import runtime as rt
import torch
import torch.distributed as dist

_root_ptr = None
_root_staging = None


def _open_root(x):
    global _root_ptr, _root_staging
    if _root_ptr is not None:
        return _root_ptr
    _root_staging = torch.empty_like(x)
    obj = [None]
    if dist.get_rank() == 0:
        _, h = rt.cudaIpcGetMemHandle(_root_staging.data_ptr())  # expect: rendezvous setup
        obj[0] = bytes(h.reserved)
    dist.broadcast_object_list(obj, src=0)  # expect: nccl_metadata setup
    if dist.get_rank() == 0:
        _root_ptr = _root_staging.data_ptr()
    else:
        h = rt.cudaIpcMemHandle_t()
        h.reserved = obj[0]
        _, p = rt.cudaIpcOpenMemHandle(h, rt.cudaIpcMemLazyEnablePeerAccess)  # expect: rendezvous setup
        _root_ptr = int(p)
    return _root_ptr


def solution(x: torch.Tensor) -> torch.Tensor:
    if not x.is_cuda or x.device.type != "cuda":
        y = x.clone()
        dist.broadcast(y, src=0)  # expect: nccl_payload fallback
        return y
    root = _open_root(x)
    if dist.get_rank() == 0:
        _root_staging.copy_(x)
        torch.cuda.current_stream().synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    out = torch.empty_like(x)
    stream = torch.cuda.current_stream().cuda_stream
    rt.cudaMemcpyAsync(out.data_ptr(), root, x.nbytes, rt.cudaMemcpyKind.cudaMemcpyDeviceToDevice, stream)  # expect: copy_engine hot
    rt.cudaStreamSynchronize(stream)
    dist.barrier()  # expect: nccl_metadata hot
    return out
