import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_buf = {}


def solution(x: torch.Tensor) -> torch.Tensor:
    key = (x.numel(), x.dtype)
    if key not in _buf:
        _buf[key] = symm_mem.empty(x.numel(), device=x.device, dtype=x.dtype)
        symm_mem.rendezvous(_buf[key], dist.group.WORLD.group_name)
    buf = _buf[key]
    buf.copy_(x.view(-1))
    if x.numel() < 1 << 16:
        out = torch.ops.symm_mem.one_shot_all_reduce(buf, "sum", dist.group.WORLD.group_name)
    else:
        out = torch.ops.symm_mem.multimem_all_reduce_(buf, "sum", dist.group.WORLD.group_name)
    return out.view_as(x)
