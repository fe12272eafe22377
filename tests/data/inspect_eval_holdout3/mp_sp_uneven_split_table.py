import torch
import torch.distributed as dist


def _split_sizes(n: int, world: int) -> list:
    base, rem = divmod(n, world)
    return [base + (1 if r < rem else 0) for r in range(world)]


def solution(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    rank = dist.get_rank()
    world = dist.get_world_size()
    sizes = _split_sizes(x.shape[0], world)

    # agree on the split table: W integers built from a Python list
    table = torch.tensor(sizes, dtype=torch.int64, device=x.device)
    dist.broadcast(table, src=0)  # expect: nccl_metadata hot
    sizes = table.tolist()

    start = sum(sizes[:rank])
    shard = x[start : start + sizes[rank]].contiguous()
    parts = [x.new_empty((s, x.shape[1])) for s in sizes]
    dist.all_gather(parts, shard)  # expect: nccl_payload hot
    full = torch.cat(parts, dim=0)

    y = full @ w.t()
    # reduce-scatter back with the same uneven table
    out = y.new_empty((sizes[rank], y.shape[1]))
    inputs = [t.contiguous() for t in torch.split(y, sizes, dim=0)]
    dist.reduce_scatter(out, inputs)  # expect: nccl_payload hot
    return out
