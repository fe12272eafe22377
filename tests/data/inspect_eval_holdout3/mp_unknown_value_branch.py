import torch
import torch.distributed as dist


def solution(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    big = bool((x.abs().amax() > 16.0).item())
    if big:
        # rescale: agree on the global max first
        m = x.abs().amax().float()
        dist.all_reduce(m, op=dist.ReduceOp.MAX)  # expect: nccl_metadata unknown
        xs = (x.float() / m).to(x.dtype)
        dist.all_reduce(xs)  # expect: nccl_payload unknown
        z = xs.float() * m
    else:
        z = x.float().clone()
        dist.all_reduce(z)  # expect: nccl_payload unknown
    votes = torch.zeros(world, dtype=torch.int32, device=x.device)
    votes.fill_(int(big))
    dist.all_reduce(votes)  # expect: nccl_metadata hot
    out = z + y.float()
    dist.all_reduce(out)  # expect: nccl_payload hot
    return (out / world).to(x.dtype) + 0 * votes.sum().to(x.dtype)
