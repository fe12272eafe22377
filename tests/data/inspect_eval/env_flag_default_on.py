"""Reduce-scatter + all-gather all-reduce over symmetric memory (copy engine for the gather)."""
import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_USE_CUSTOM = os.environ.get("PKB_CUSTOM_AR", "1") == "1"
_ctx = {}


def _ctx_for(x):
    if "hdl" not in _ctx:
        _ctx["buf"] = symm_mem.empty(x.numel(), dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        _ctx["hdl"] = symm_mem.rendezvous(_ctx["buf"], dist.group.WORLD)  # expect: rendezvous setup
    return _ctx["buf"], _ctx["hdl"]


def solution(x: torch.Tensor) -> torch.Tensor:
    if not _USE_CUSTOM:
        y = x.clone()
        dist.all_reduce(y)  # expect: nccl_payload fallback
        return y
    buf, hdl = _ctx_for(x)
    w, r = hdl.world_size, hdl.rank
    n = x.numel() // w
    buf.copy_(x.view(-1))
    dist.barrier()  # expect: nccl_metadata hot
    part = torch.zeros(n, dtype=torch.float32, device=x.device)
    for p in range(w):
        part += hdl.get_buffer(p, (x.numel(),), x.dtype)[r * n:(r + 1) * n].float()
    dist.barrier()  # expect: nccl_metadata hot
    buf[r * n:(r + 1) * n] = part.to(x.dtype)
    dist.barrier()  # expect: nccl_metadata hot
    out = torch.empty_like(x).view(-1)
    for p in range(w):
        out[p * n:(p + 1) * n] = hdl.get_buffer(p, (x.numel(),), x.dtype)[p * n:(p + 1) * n]  # expect: copy_engine hot
    dist.barrier()  # expect: nccl_metadata hot
    return out.view_as(x)
