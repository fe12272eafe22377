import torch
import torch.distributed as dist

FINE_BINS = 16384


def solution(x: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    xf = x.float()
    lo = xf.min()
    hi = xf.max()
    dist.all_reduce(lo, op=dist.ReduceOp.MIN)  # expect: nccl_metadata hot
    dist.all_reduce(hi, op=dist.ReduceOp.MAX)  # expect: nccl_metadata hot
    lo_f, hi_f = float(lo), float(hi)

    # 4*W coarse bins: bounded by the world size
    coarse = torch.histc(xf, bins=4 * world, min=lo_f, max=hi_f)
    dist.all_reduce(coarse)  # expect: nccl_metadata hot

    # a module constant, but over 4096 elements
    fine = torch.histc(xf, bins=FINE_BINS, min=lo_f, max=hi_f)
    dist.all_reduce(fine)  # expect: nccl_payload hot

    # one bin per column: sized by the input
    per_col = torch.histc(xf, bins=x.shape[1], min=lo_f, max=hi_f)
    dist.all_reduce(per_col)  # expect: nccl_payload hot

    cdf = torch.cumsum(fine, 0) / fine.sum().clamp_min(1.0)
    edges = torch.linspace(lo_f, hi_f, FINE_BINS + 1, device=x.device)[1:]
    idx = torch.searchsorted(edges, xf.flatten()).clamp_(max=FINE_BINS - 1)
    eq = cdf[idx].view_as(xf) + 0.0 * coarse.sum() + 0.0 * per_col.sum()
    return eq.to(x.dtype)
