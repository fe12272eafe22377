"""Copy-engine reduce-scatter; the IPC exchange runs once, and again only when a retry is needed."""
import ctypes

import torch
import torch.distributed as dist

_rt = ctypes.CDLL("libcudart.so")
_S = {"ptrs": None}


def _exchange(inbox):
    h = (ctypes.c_char * 64)()
    _rt.cudaIpcGetMemHandle(h, ctypes.c_void_p(inbox.data_ptr()))  # expect: rendezvous setup
    all_h = [None] * dist.get_world_size()
    dist.all_gather_object(all_h, h.raw)  # expect: nccl_metadata setup
    ptrs = []
    for r, raw in enumerate(all_h):
        p = ctypes.c_void_p(inbox.data_ptr())
        if r != dist.get_rank():
            _rt.cudaIpcOpenMemHandle(ctypes.byref(p), (ctypes.c_char * 64).from_buffer_copy(raw), 1)  # expect: rendezvous setup
        ptrs.append(p.value)
    return ptrs


def _pull_slices(stage, rank, world, blk):
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    for p in range(world):
        rc = _rt.cudaMemcpyPeerAsync(ctypes.c_void_p(stage[p].data_ptr()), rank,  # expect: copy_engine hot
                                     ctypes.c_void_p(_S["ptrs"][p] + rank * blk), p, ctypes.c_size_t(blk), stream)
        if rc != 0:
            raise OSError(rc)


def solution(x: torch.Tensor) -> torch.Tensor:
    rank, world = dist.get_rank(), dist.get_world_size()
    if _S["ptrs"] is None:
        _S["inbox"] = torch.empty_like(x)
        _S["ptrs"] = _exchange(_S["inbox"])
    _S["inbox"].copy_(x)
    torch.cuda.synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    blk = x.nbytes // world
    stage = torch.empty((world, x.numel() // world), dtype=x.dtype, device=x.device)
    try:
        _pull_slices(stage, rank, world, blk)
    except OSError:
        # stale mapping (e.g. the inbox was reallocated): refresh handles once and retry
        _S["ptrs"] = _exchange(_S["inbox"])
        _pull_slices(stage, rank, world, blk)
    torch.cuda.current_stream().synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    return stage.float().sum(0).to(x.dtype).view(x.shape[0] // world, *x.shape[1:])
