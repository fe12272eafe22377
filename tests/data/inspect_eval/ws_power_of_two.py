"""Recursive-halving reduce-scatter with NCCL send/recv; non-power-of-two worlds use the collective."""
import torch
import torch.distributed as dist


def _nccl_reduce_scatter(x, world):
    out = torch.empty(x.shape[0] // world, *x.shape[1:], dtype=x.dtype, device=x.device)
    dist.reduce_scatter_tensor(out, x)  # expect: nccl_payload fallback
    return out


def solution(x: torch.Tensor) -> torch.Tensor:
    world, rank = dist.get_world_size(), dist.get_rank()
    if world & (world - 1):
        return _nccl_reduce_scatter(x, world)
    cur = x.clone()
    lo, hi = 0, x.shape[0]
    dist_ = world // 2
    while dist_ >= 1:
        partner = rank ^ dist_
        mid = (lo + hi) // 2
        if rank & dist_:
            keep, send = (mid, hi), (lo, mid)
        else:
            keep, send = (lo, mid), (mid, hi)
        recv = torch.empty_like(cur[keep[0]:keep[1]])
        ops = [dist.P2POp(dist.isend, cur[send[0]:send[1]].contiguous(), partner),
               dist.P2POp(dist.irecv, recv, partner)]
        for req in dist.batch_isend_irecv(ops):  # expect: nccl_payload hot
            req.wait()
        cur[keep[0]:keep[1]] += recv
        lo, hi = keep
        dist_ //= 2
    return cur[lo:hi].clone()
