import functools

import torch
import torch.distributed as dist

TP = 4


@functools.lru_cache(maxsize=None)
def _groups():
    world = dist.get_world_size()
    tp_groups, dp_groups = [], []
    for start in range(0, world, TP):
        tp_groups.append(dist.new_group(list(range(start, start + TP))))  # expect: nccl_metadata setup
    for off in range(TP):
        dp_groups.append(dist.new_group(list(range(off, world, TP))))  # expect: nccl_metadata setup
    return tp_groups, dp_groups


def _column_parallel(x, w, group):
    # sequence-parallel input: gather the sequence, multiply by the local column shard
    tp = dist.get_world_size(group)
    full = torch.empty((tp * x.shape[0], x.shape[1]), dtype=x.dtype, device=x.device)
    dist.all_gather_into_tensor(full, x, group=group)  # expect: nccl_payload hot
    return full @ w[: w.shape[0] // tp].t()


def _row_parallel(h, w, group):
    tp = dist.get_world_size(group)
    partial = h @ w[:, : h.shape[1]].t()
    out = torch.empty((partial.shape[0] // tp, partial.shape[1]), dtype=h.dtype, device=h.device)
    dist.reduce_scatter_tensor(out, partial.contiguous(), group=group)  # expect: nccl_payload hot
    return out


def solution(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    if not dist.is_initialized():
        dist.init_process_group("nccl")  # expect: nccl_metadata fallback
    rank = dist.get_rank()
    tp_groups, dp_groups = _groups()
    tp_group = tp_groups[rank // TP]
    dp_group = dp_groups[rank % TP]
    h = torch.nn.functional.gelu(_column_parallel(x, w1, tp_group))
    y = _row_parallel(h, w2, tp_group)
    # data-parallel loss scalar over the DP group
    loss = y.float().pow(2).mean()
    dist.all_reduce(loss, group=dp_group)  # expect: nccl_metadata hot
    return y * (1.0 + 0.0 * loss).to(y.dtype)
