import torch
import torch.distributed as dist


def solution(x: torch.Tensor) -> torch.Tensor:
    rank = dist.get_rank()
    world = dist.get_world_size()
    local_loss = x.float().pow(2).mean()

    gather_list = [torch.empty_like(local_loss) for _ in range(world)] if rank == 0 else None
    dist.gather(local_loss, gather_list, dst=0)  # expect: nccl_metadata hot

    nz = (x != 0).sum().float()
    dist.reduce(nz, dst=0)  # expect: nccl_metadata hot

    row_losses = x.float().pow(2).mean(dim=1)
    rows_list = [torch.empty_like(row_losses) for _ in range(world)] if rank == 0 else None
    dist.gather(row_losses, rows_list, dst=0)  # expect: nccl_payload hot

    if rank == 0:
        weights = torch.stack(gather_list).softmax(0)
        blend = (torch.stack(rows_list) * weights.unsqueeze(1)).sum(0)
    else:
        blend = torch.empty_like(row_losses)
    dist.broadcast(blend, src=0)  # expect: nccl_payload hot
    return (x.float() * blend.unsqueeze(1) / nz.clamp_min(1.0)).to(x.dtype)
