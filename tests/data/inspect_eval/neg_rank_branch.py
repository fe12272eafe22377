import torch
import torch.distributed as dist


@torch.no_grad()
def solution(x: torch.Tensor) -> torch.Tensor:
    """Pipeline hand-off: even ranks send to the next odd rank, odd ranks add what they receive."""
    rank, world = dist.get_rank(), dist.get_world_size()
    shape = torch.tensor([x.shape[0], x.shape[1]], device=x.device)
    dist.broadcast(shape, src=0)  # expect: nccl_metadata hot
    if rank % 2 == 0:
        dist.send(x.contiguous(), dst=rank + 1)  # expect: nccl_payload hot
        out = x.clone()
    else:
        recv = torch.empty_like(x)
        dist.recv(recv, src=rank - 1)  # expect: nccl_payload hot
        out = x + recv
    return out
