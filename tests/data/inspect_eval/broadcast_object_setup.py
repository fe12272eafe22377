"""Broadcast: the root's config is agreed once with broadcast_object_list; payload uses NCCL."""
import torch
import torch.distributed as dist

_CFG = None


def _config(x):
    global _CFG
    if _CFG is None:
        cfg = [{"root": 0, "chunk_rows": 256, "shape": tuple(x.shape)}] if dist.get_rank() == 0 else [None]
        dist.broadcast_object_list(cfg, src=0)  # expect: nccl_metadata setup
        _CFG = cfg[0]
    return _CFG


def solution(x: torch.Tensor) -> torch.Tensor:
    cfg = _config(x)
    out = x.clone()
    rows = cfg["chunk_rows"]
    handles = []
    for start in range(0, out.shape[0], rows):
        handles.append(dist.broadcast(out[start:start + rows], src=cfg["root"], async_op=True))  # expect: nccl_payload hot
    for h in handles:
        h.wait()
    return out
