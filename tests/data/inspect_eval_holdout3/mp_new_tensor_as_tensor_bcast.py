import torch
import torch.distributed as dist


def solution(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    rank = dist.get_rank()
    world = dist.get_world_size()
    # rank 0 announces the shape of the weight it will broadcast
    meta = x.new_tensor([w.shape[0], w.shape[1], int(w.dtype == torch.bfloat16)]).long()
    dist.broadcast(meta, src=0)  # expect: nccl_metadata hot
    rows, cols, _ = meta.tolist()

    src_w = w if rank == 0 else torch.empty((rows, cols), dtype=w.dtype, device=w.device)
    dist.broadcast(src_w, src=0)  # expect: nccl_payload hot

    # per-rank row quota as a list of W Python ints
    quota = torch.as_tensor([x.shape[0] // world] * world, device=x.device)
    dist.all_reduce(quota, op=dist.ReduceOp.MIN)  # expect: nccl_metadata hot

    y = x @ src_w.t()
    # the first rows of the product as a probe: a slice of the input's rows
    probe = y[: int(quota[0])].contiguous()
    dist.all_reduce(probe)  # expect: nccl_payload hot
    return y + 0 * probe.mean()
