"""Gather to every rank through CUDA IPC; reads with cudaMemcpyAsync on dedicated streams."""
from cuda import cudart
import torch
import torch.distributed as dist

_D2D = cudart.cudaMemcpyKind.cudaMemcpyDeviceToDevice


def _chk(ret):
    if ret[0] != cudart.cudaError_t.cudaSuccess:
        raise RuntimeError(cudart.cudaGetErrorString(ret[0])[1])
    return ret[1] if len(ret) > 1 else None


class _Peers:
    inbox = None
    remote = None
    streams = None


def _open(x):
    if _Peers.remote is None:
        _Peers.inbox = torch.empty_like(x)
        handle = _chk(cudart.cudaIpcGetMemHandle(_Peers.inbox.data_ptr()))  # expect: rendezvous setup
        everyone = [None] * dist.get_world_size()
        dist.all_gather_object(everyone, bytes(handle.reserved))  # expect: nccl_metadata setup
        _Peers.remote = {}
        for r, raw in enumerate(everyone):
            if r == dist.get_rank():
                continue
            h = cudart.cudaIpcMemHandle_t()
            h.reserved = raw
            _Peers.remote[r] = int(_chk(cudart.cudaIpcOpenMemHandle(h, cudart.cudaIpcMemLazyEnablePeerAccess)))  # expect: rendezvous setup
        _Peers.streams = [torch.cuda.Stream() for _ in range(4)]


def solution(x: torch.Tensor) -> torch.Tensor:
    _open(x)
    rank, world = dist.get_rank(), dist.get_world_size()
    _Peers.inbox.copy_(x)
    torch.cuda.synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    out = torch.empty((world,) + tuple(x.shape), dtype=x.dtype, device=x.device)
    out[rank].copy_(x)
    for i, (r, ptr) in enumerate(_Peers.remote.items()):
        s = _Peers.streams[i % len(_Peers.streams)]
        _chk(cudart.cudaMemcpyAsync(out[r].data_ptr(), ptr, x.nbytes, _D2D, s.cuda_stream))  # expect: copy_engine hot
    torch.cuda.synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    return out.flatten(0, 1)
