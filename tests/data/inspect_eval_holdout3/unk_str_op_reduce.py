import torch
import torch.distributed as dist

_OPS = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}


def solution(x: torch.Tensor, op: str, keep_stats: bool = True) -> torch.Tensor:
    world = dist.get_world_size()
    if op == "mean":
        y = x.float().clone()
        dist.all_reduce(y)  # expect: nccl_payload unknown
        y.div_(world)
    elif op in _OPS:
        y = x.float().clone()
        dist.all_reduce(y, op=_OPS[op])  # expect: nccl_payload unknown
    else:
        raise ValueError(op)

    if keep_stats:
        stat = torch.stack([y.amax(), y.amin(), y.mean()])
        dist.all_reduce(stat, op=dist.ReduceOp.MAX)  # expect: nccl_metadata hot
    else:
        stat = torch.zeros(3, device=x.device)
        dist.broadcast(stat, src=0)  # expect: nccl_metadata fallback

    if op == "max":
        count = (y == y.amax()).sum()
        dist.all_reduce(count)  # expect: nccl_metadata unknown
        y = y + 0.0 * count
    return (y + 0.0 * stat.sum()).to(x.dtype)
