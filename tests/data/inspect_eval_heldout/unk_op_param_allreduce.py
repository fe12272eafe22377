"""All-reduce with a caller-chosen reduction. Sums use the symmetric-memory
one-shot kernel; the other reductions are forwarded to NCCL."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_OPS = {
    "sum": dist.ReduceOp.SUM,
    "max": dist.ReduceOp.MAX,
    "min": dist.ReduceOp.MIN,
    "avg": dist.ReduceOp.AVG,
}
_bufs = {}


def _symm_sum(x: torch.Tensor) -> torch.Tensor:
    group_name = dist.group.WORLD.group_name
    key = (x.numel(), x.dtype)
    buf = _bufs.get(key)
    if buf is None:
        buf = symm_mem.empty(x.numel(), dtype=x.dtype, device=x.device)  # expect: rendezvous unknown
        symm_mem.rendezvous(buf, group_name)  # expect: rendezvous unknown
        _bufs[key] = buf
    buf.copy_(x.reshape(-1))
    return torch.ops.symm_mem.one_shot_all_reduce(buf, "sum", group_name).view_as(x)


@torch.no_grad()
def solution(tensor: torch.Tensor, op: str) -> torch.Tensor:
    op = op.lower()
    if op == "sum":
        result = _symm_sum(tensor)
    else:
        result = tensor.clone()
        dist.all_reduce(result, op=_OPS[op])  # expect: nccl_payload unknown
    return result
