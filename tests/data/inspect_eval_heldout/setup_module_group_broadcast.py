"""Broadcast with a dedicated NCCL communicator created at import time, plus a
chunked pipeline so large tensors overlap the tree stages."""
import os

import torch
import torch.distributed as dist

_CHUNK_BYTES = 8 << 20
_LOCAL_RANK = int(os.environ.get("LOCAL_RANK", "0"))
_BCAST_PG = dist.new_group(backend="nccl") if dist.is_initialized() else None  # expect: nccl_metadata setup


def _group():
    return _BCAST_PG if _BCAST_PG is not None else dist.group.WORLD


@torch.no_grad()
def solution(tensor: torch.Tensor, src: int = 0) -> torch.Tensor:
    out = tensor.contiguous().clone()
    flat = out.view(-1)
    chunk = max(1, _CHUNK_BYTES // out.element_size())
    group = _group()
    work = []
    for start in range(0, flat.numel(), chunk):
        piece = flat[start:start + chunk]
        work.append(dist.broadcast(piece, src=src, group=group, async_op=True))  # expect: nccl_payload hot
    for w in work:
        w.wait()
    return out
