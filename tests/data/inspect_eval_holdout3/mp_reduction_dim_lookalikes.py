import torch
import torch.distributed as dist


def solution(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    # sequence-parallel LayerNorm statistics, one entry per column
    col_sum = x.float().sum(dim=0)
    dist.all_reduce(col_sum)  # expect: nccl_payload hot

    row_max = x.float().amax(dim=-1)
    dist.all_reduce(row_max, op=dist.ReduceOp.MAX)  # expect: nccl_payload hot

    col_sq = x.float().pow(2).sum(0)
    dist.all_reduce(col_sq)  # expect: nccl_payload hot

    # full reductions: one element each
    total = x.float().sum()
    dist.all_reduce(total)  # expect: nccl_metadata hot

    peak = y.float().max()
    dist.all_reduce(peak, op=dist.ReduceOp.MAX)  # expect: nccl_metadata hot

    # a few leading rows of y: a slice of an input
    k = 4
    head = y[:k].float().contiguous()
    dist.all_reduce(head)  # expect: nccl_payload hot

    n = x.shape[0] * dist.get_world_size()
    mean = col_sum / n
    var = col_sq / n - mean * mean
    z = (x.float() - mean) / (var + 1e-5).sqrt()
    z = z / row_max.clamp_min(1e-6).unsqueeze(1) * (total / peak)
    return (z + head.mean()).to(x.dtype)
