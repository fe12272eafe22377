import torch
import torch.distributed as dist


@torch.no_grad()
def solution(x: torch.Tensor) -> torch.Tensor:
    """Normalise by the global row norms: gather to rank 0, compute, scatter back."""
    rank, world = dist.get_rank(), dist.get_world_size()
    local_sq = x.float().pow(2).sum(dim=1)
    if rank == 0:
        parts = [torch.empty_like(local_sq) for _ in range(world)]
        dist.gather(local_sq, gather_list=parts, dst=0)  # expect: nccl_payload hot
        total = torch.stack(parts).sum(0).sqrt()
        chunks = [total.clone() for _ in range(world)]
    else:
        dist.gather(local_sq, dst=0)  # expect: nccl_payload hot
        chunks = None
    norms = torch.empty_like(local_sq)
    dist.scatter(norms, scatter_list=chunks, src=0)  # expect: nccl_payload hot
    return (x.float() / norms.clamp_min(1e-6)[:, None]).to(x.dtype)
