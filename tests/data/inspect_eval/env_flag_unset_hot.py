"""Opt-in copy-engine all-gather (ENABLE_P2P_COPY=1); NCCL by default."""
import os

import cupy as cp
import torch
import torch.distributed as dist

_ipc = {}


def _peer_pointers(staging):
    if "ptrs" not in _ipc:
        h = cp.cuda.runtime.ipcGetMemHandle(staging.data_ptr())  # expect: rendezvous fallback
        hs = [None] * dist.get_world_size()
        dist.all_gather_object(hs, h)  # expect: nccl_metadata fallback
        me = dist.get_rank()
        _ipc["ptrs"] = [staging.data_ptr() if i == me else cp.cuda.runtime.ipcOpenMemHandle(hi)  # expect: rendezvous fallback
                        for i, hi in enumerate(hs)]
    return _ipc["ptrs"]


def _p2p_all_gather(x, world):
    staging = _ipc.setdefault("staging", torch.empty_like(x))
    ptrs = _peer_pointers(staging)
    staging.copy_(x)
    torch.cuda.synchronize()
    dist.barrier()  # expect: nccl_metadata fallback
    out = torch.empty((world,) + tuple(x.shape), dtype=x.dtype, device=x.device)
    for i, p in enumerate(ptrs):
        cp.cuda.runtime.memcpyPeer(out[i].data_ptr(), x.device.index, p, i, x.nbytes)  # expect: copy_engine fallback
    dist.barrier()  # expect: nccl_metadata fallback
    return out.flatten(0, 1)


def solution(x: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    if not os.getenv("ENABLE_P2P_COPY"):
        out = torch.empty((world * x.shape[0],) + tuple(x.shape[1:]), dtype=x.dtype, device=x.device)
        dist.all_gather_into_tensor(out, x)  # expect: nccl_payload hot
        return out
    return _p2p_all_gather(x, world)
