"""Push this rank's tensor into the next rank's symmetric buffer with copy_."""

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_state = {}


def _buffers(x):
    key = (x.numel(), x.dtype)
    if key not in _state:
        buf = symm_mem.empty(x.numel(), device=x.device, dtype=x.dtype)
        _state[key] = (buf, symm_mem.rendezvous(buf, dist.group.WORLD))
    return _state[key]


def solution(x: torch.Tensor) -> torch.Tensor:
    _, hdl = _buffers(x)
    peer = (hdl.rank + 1) % hdl.world_size
    remote = hdl.get_buffer(peer, x.shape, x.dtype)
    remote.copy_(x)
    mine = hdl.get_buffer(hdl.rank, x.shape, x.dtype)
    out = torch.empty_like(x)
    out.copy_(mine)
    return out
