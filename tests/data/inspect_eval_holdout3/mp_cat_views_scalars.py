import torch
import torch.distributed as dist


def solution(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    packed = torch.cat(
        [
            a.float().sum().view(1),
            b.float().abs().amax().view(1),
            torch.linalg.vector_norm(c.float()).reshape(1),
        ]
    )
    dist.all_reduce(packed)  # expect: nccl_metadata hot

    mu = a.float().mean().unsqueeze(0).clone()
    dist.all_reduce(mu)  # expect: nccl_metadata hot
    mu.div_(world)

    anyneg = (b < 0).any().to(torch.int32).cuda()
    dist.all_reduce(anyneg, op=dist.ReduceOp.MAX)  # expect: nccl_metadata hot

    colstats = torch.cat([a.float().sum(dim=0), b.float().amax(dim=0)])
    dist.all_reduce(colstats)  # expect: nccl_payload hot

    per_rank = torch.stack([torch.norm(t.float()) for t in (a, b, c)]).view(1, -1).contiguous()
    gathered = [torch.empty_like(per_rank) for _ in range(world)]
    dist.all_gather(gathered, per_rank)  # expect: nccl_metadata hot

    scale = packed[0] / (packed[1] * packed[2] + 1e-6)
    out = a.float() * scale + mu + anyneg + colstats[: a.shape[1]]
    return (out + torch.cat(gathered).sum()).to(a.dtype)
