"""GNN neighbour sampling driven by rank 0: rank 0 draws the fan-out neighbours of
every rank's seed block and scatters them; each rank mean-aggregates its sampled
neighbourhood; rank 0 gathers the results and broadcasts the full matrix."""
import torch
import torch.distributed as dist


def _sample(n: int, world: int, fanout: int, device, gen: torch.Generator) -> torch.Tensor:
    seeds = torch.randint(0, n, (world, n // world), device=device, generator=gen)
    return (seeds[..., None] + torch.arange(1, fanout + 1, device=device)) % n


def solution(features: torch.Tensor, fanout: int = 5, seed: int = 1234) -> torch.Tensor:
    world, rank = dist.get_world_size(), dist.get_rank()
    n, d = features.shape
    per = n // world
    hdr = torch.tensor([n, d, fanout], dtype=torch.int64, device=features.device)
    dist.broadcast(hdr, src=0)  # expect: nccl_metadata hot
    my_nbrs = torch.empty((per, fanout), dtype=torch.int64, device=features.device)
    if rank == 0:
        gen = torch.Generator(device=features.device).manual_seed(seed)
        chunks = list(_sample(n, world, fanout, features.device, gen).unbind(0))
    else:
        chunks = None
    dist.scatter(my_nbrs, chunks, src=0)  # expect: nccl_payload hot
    agg = features[my_nbrs.reshape(-1)].view(per, fanout, d).float().mean(1).to(features.dtype)
    bucket = [torch.empty_like(agg) for _ in range(world)] if rank == 0 else None
    dist.gather(agg, bucket, dst=0)  # expect: nccl_payload hot
    out = torch.empty((world * per, d), dtype=features.dtype, device=features.device)
    if rank == 0:
        out.copy_(torch.cat(bucket))
    dist.broadcast(out, src=0)  # expect: nccl_payload hot
    return out
