"""ZeRO-1 SGD step with overflow check. Each rank owns a 1/W slice of the flat
parameters: it updates its slice and all-gathers the new parameters. If any rank saw
a non-finite gradient the step is skipped and rank 0's parameters are re-broadcast so
that all replicas stay bit-identical."""
import torch
import torch.distributed as dist


@torch.no_grad()
def solution(params: torch.Tensor, grads: torch.Tensor, lr: float = 1e-3) -> torch.Tensor:
    rank, world = dist.get_rank(), dist.get_world_size()
    flat_p = params.reshape(-1)
    flat_g = grads.reshape(-1)
    shard = flat_p.numel() // world
    lo, hi = rank * shard, (rank + 1) * shard

    g_shard = torch.empty(shard, dtype=grads.dtype, device=grads.device)
    dist.reduce_scatter_tensor(g_shard, flat_g.contiguous(), op=dist.ReduceOp.AVG)  # expect: nccl_payload hot
    found_inf = (~torch.isfinite(g_shard)).any().to(torch.float32).reshape(1)
    dist.all_reduce(found_inf, op=dist.ReduceOp.MAX)  # expect: nccl_metadata hot

    new_params = torch.empty_like(flat_p)
    if found_inf.item() > 0:
        new_params.copy_(flat_p)
        dist.broadcast(new_params, src=0)  # expect: nccl_payload unknown
    else:
        p_shard = (flat_p[lo:hi].float() - lr * g_shard.float()).to(params.dtype)
        dist.all_gather_into_tensor(new_params, p_shard)  # expect: nccl_payload unknown
    return new_params.view_as(params)
