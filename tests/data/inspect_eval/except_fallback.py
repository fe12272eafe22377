import warnings

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_buf = None
_hdl = None


def _get_symm(x):
    global _buf, _hdl
    if _hdl is None:
        _buf = symm_mem.empty(x.shape, dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        _hdl = symm_mem.rendezvous(_buf, group=dist.group.WORLD)  # expect: rendezvous setup
    return _buf, _hdl


def _symm_all_reduce(x):
    buf, hdl = _get_symm(x)
    buf.copy_(x)
    torch.ops.symm_mem.one_shot_all_reduce_out(buf, "sum", dist.group.WORLD.group_name, out=x)
    return x


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    out = tensor.clone()
    try:
        return _symm_all_reduce(out)
    except Exception as exc:  # pragma: no cover - depends on the driver
        warnings.warn(f"symmetric memory all-reduce failed ({exc}); using NCCL")
        dist.all_reduce(out, op=dist.ReduceOp.SUM)  # expect: nccl_payload fallback
        return out
