"""Reduce with a selectable operation (sum / avg / max / min / prod). max and min
are all-reduced directly; the others reduce to `dst` and broadcast from there."""
import torch
import torch.distributed as dist

_OPS = {
    "sum": dist.ReduceOp.SUM,
    "max": dist.ReduceOp.MAX,
    "min": dist.ReduceOp.MIN,
    "prod": dist.ReduceOp.PRODUCT,
}


def solution(tensor: torch.Tensor, op: str, dst: int = 0) -> torch.Tensor:
    world = dist.get_world_size()
    rank = dist.get_rank()
    work = tensor.float().clone()
    if op == "avg":
        work.div_(world)
        red = dist.ReduceOp.SUM
    else:
        red = _OPS[op]
    if op in ("max", "min"):
        dist.all_reduce(work, op=red)  # expect: nccl_payload unknown
    else:
        dist.reduce(work, dst=dst, op=red)  # expect: nccl_payload unknown
        dist.broadcast(work, src=dst)  # expect: nccl_payload unknown
    ok = torch.tensor([int(rank == dst) + 1], device=tensor.device, dtype=torch.int32)
    dist.all_reduce(ok)  # expect: nccl_metadata hot
    solution.participants = ok
    return work.to(tensor.dtype)
