"""Pencil-decomposed FFT, transpose step: the column block destined for rank p is
written straight into p's inbox with a strided 2-D peer copy (no packing kernel)."""
import torch
import torch.distributed as dist
from cuda import cudart

_ready = False
_inbox = None
_peer_ptrs = []


def _init(nbytes: int, device: torch.device) -> None:
    global _ready, _inbox, _peer_ptrs
    world, rank = dist.get_world_size(), dist.get_rank()
    _inbox = torch.empty(nbytes, dtype=torch.uint8, device=device)
    err, h = cudart.cudaIpcGetMemHandle(_inbox.data_ptr())  # expect: rendezvous setup
    everyone = [None] * world
    dist.all_gather_object(everyone, bytes(h.reserved))  # expect: nccl_metadata setup
    _peer_ptrs = []
    for r, raw in enumerate(everyone):
        if r == rank:
            _peer_ptrs.append(_inbox.data_ptr())
        else:
            hh = cudart.cudaIpcMemHandle_t()
            hh.reserved = raw
            err, p = cudart.cudaIpcOpenMemHandle(hh, cudart.cudaIpcMemLazyEnablePeerAccess)  # expect: rendezvous setup
            _peer_ptrs.append(int(p))
    _ready = True


def solution(x: torch.Tensor) -> torch.Tensor:
    world, rank = dist.get_world_size(), dist.get_rank()
    xc = torch.fft.fft(x.float(), dim=1).to(torch.complex64)  # [rows, cols]
    rows, cols = xc.shape
    es = xc.element_size()
    cb = cols // world
    if not _ready:
        _init(xc.numel() * es, x.device)
    stream = torch.cuda.current_stream().cuda_stream
    torch.cuda.current_stream().synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    kind = cudart.cudaMemcpyKind.cudaMemcpyDeviceToDevice
    for p in range(world):
        dst = _peer_ptrs[p] + rank * rows * cb * es
        src = xc.data_ptr() + p * cb * es
        (err,) = cudart.cudaMemcpy2DAsync(dst, cb * es, src, cols * es, cb * es, rows, kind, stream)  # expect: copy_engine hot
    torch.cuda.current_stream().synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    recv = _inbox.view(torch.complex64).view(world, rows, cb)  # [src rank, rows, cb]
    yt = recv.permute(2, 0, 1).reshape(cb, world * rows)
    return torch.view_as_real(torch.fft.fft(yt, dim=1)).to(x.dtype)
