"""Row-strip halo exchange with NCCL point-to-point, then a 5-point Laplacian.

Interior ranks talk to both neighbours, the first and last rank only to one."""
import torch
import torch.distributed as dist

HALO = 1


def _blocking_exchange(x: torch.Tensor, rank: int, world: int):
    """Older synchronous version, kept for debugging deadlocks."""
    top = torch.zeros_like(x[:HALO])
    bottom = torch.zeros_like(x[-HALO:])
    if rank % 2 == 0 and rank + 1 < world:
        dist.send(x[-HALO:].contiguous(), dst=rank + 1)  # expect: nccl_payload fallback
        dist.recv(bottom, src=rank + 1)  # expect: nccl_payload fallback
    return top, bottom


@torch.no_grad()
def solution(x: torch.Tensor) -> torch.Tensor:
    rank, world = dist.get_rank(), dist.get_world_size()
    x = x.contiguous()
    top = torch.zeros_like(x[:HALO])
    bottom = torch.zeros_like(x[-HALO:])
    if world > 1:
        reqs = []
        if rank > 0:
            reqs.append(dist.isend(x[:HALO].contiguous(), dst=rank - 1))  # expect: nccl_payload hot
            reqs.append(dist.irecv(top, src=rank - 1))  # expect: nccl_payload hot
        if rank < world - 1:
            reqs.append(dist.isend(x[-HALO:].contiguous(), dst=rank + 1))  # expect: nccl_payload hot
            reqs.append(dist.irecv(bottom, src=rank + 1))  # expect: nccl_payload hot
        for req in reqs:
            req.wait()

    p = torch.cat([top, x, bottom], dim=0).float()
    p = torch.nn.functional.pad(p, (1, 1))
    lap = p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:] - 4.0 * p[1:-1, 1:-1]
    return lap.to(x.dtype)
