"""All-to-all through symmetric memory: after a barrier every rank reads chunk
`rank` of each peer's buffer with plain tensor assignments (P2P over NVLink)."""
from typing import Dict, Tuple

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem


class _A2AWorkspace:
    _instances: Dict[Tuple, "_A2AWorkspace"] = {}

    def __init__(self, numel: int, dtype: torch.dtype, device: torch.device):
        self.numel, self.dtype = numel, dtype
        self.buf = symm_mem.empty(numel, dtype=dtype, device=device)  # expect: rendezvous setup
        self.hdl = symm_mem.rendezvous(self.buf, dist.group.WORLD.group_name)  # expect: rendezvous setup
        self.rank, self.world = self.hdl.rank, self.hdl.world_size

    @classmethod
    def get(cls, x: torch.Tensor) -> "_A2AWorkspace":
        key = (x.numel(), x.dtype, x.device)
        if key not in cls._instances:
            cls._instances[key] = cls(*key)
        return cls._instances[key]

    def peer(self, r: int) -> torch.Tensor:
        return self.hdl.get_buffer(r, (self.numel,), self.dtype)


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    ws = _A2AWorkspace.get(tensor)
    x = tensor.contiguous().view(-1)
    ws.buf.copy_(x)
    ws.hdl.barrier(channel=0)
    chunk = ws.numel // ws.world
    me = slice(ws.rank * chunk, (ws.rank + 1) * chunk)
    out = torch.empty_like(x)
    for r in range(ws.world):
        dst = slice(r * chunk, (r + 1) * chunk)
        if r == ws.rank:
            out[dst] = x[me]
        else:
            out[dst] = ws.peer(r)[me]  # expect: copy_engine hot
    ws.hdl.barrier(channel=1)
    return out.view_as(tensor)
