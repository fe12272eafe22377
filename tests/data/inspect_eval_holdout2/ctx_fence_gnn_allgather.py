"""GNN mean neighbour aggregation over a row-partitioned node feature matrix.
All node features are all-gathered, then each rank aggregates its own nodes."""
import contextlib
import os

import torch
import torch.distributed as dist

_FENCE = os.environ.get("GNN_AGG_FENCE", "0") == "1"


@contextlib.contextmanager
def _fenced(group):
    dist.barrier(group=group)  # expect: nccl_metadata fallback
    try:
        yield
    finally:
        torch.cuda.current_stream().synchronize()


@contextlib.contextmanager
def _nvtx(name: str):
    torch.cuda.nvtx.range_push(name)
    try:
        yield
    finally:
        torch.cuda.nvtx.range_pop()


def _neighbour_index(n_global: int, device) -> torch.Tensor:
    # fixed circulant graph: node i links to i+1, i-1, i+7, i-7 (mod N)
    base = torch.arange(n_global, device=device)
    offs = torch.tensor([1, -1, 7, -7], device=device)
    return (base[:, None] + offs[None, :]) % n_global


def solution(node_feats: torch.Tensor, group=None) -> torch.Tensor:
    group = group or dist.group.WORLD
    world = dist.get_world_size(group)
    rank = dist.get_rank(group)
    n_local, dim = node_feats.shape
    ctx = _fenced(group) if _FENCE else contextlib.nullcontext()
    with ctx, _nvtx("gather_feats"):
        full = torch.empty((world * n_local, dim), dtype=node_feats.dtype, device=node_feats.device)
        dist.all_gather_into_tensor(full, node_feats.contiguous(), group=group)  # expect: nccl_payload hot
    nbr = _neighbour_index(world * n_local, node_feats.device)
    mine = nbr[rank * n_local:(rank + 1) * n_local]
    agg = full[mine].float().mean(dim=1)
    return (0.5 * node_feats.float() + 0.5 * agg).to(node_feats.dtype)
