# profile: dtype=bfloat16 world_size=2
"""ZeRO-2 gradient reduce-scatter. Two ranks swap halves directly; larger groups
run a ring with blocking send/recv ordered by rank parity."""
import torch
import torch.distributed as dist


def _pairwise(x: torch.Tensor, rank: int) -> torch.Tensor:
    halves = x.chunk(2, dim=0)
    other = 1 - rank
    recv = torch.empty_like(halves[rank])
    reqs = [
        dist.isend(halves[other].contiguous(), dst=other),  # expect: nccl_payload hot
        dist.irecv(recv, src=other),  # expect: nccl_payload hot
    ]
    for r in reqs:
        r.wait()
    return (halves[rank].float() + recv.float()).to(x.dtype)


def _ring(x: torch.Tensor, rank: int, world: int) -> torch.Tensor:
    chunks = [c.contiguous() for c in x.chunk(world, dim=0)]
    acc = chunks[(rank - 1) % world].float()
    buf = torch.empty_like(chunks[0])
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    for step in range(1, world):
        recv_idx = (rank - step - 1) % world
        if rank % 2 == 0:
            dist.send(acc.to(x.dtype), dst=nxt)  # expect: nccl_payload fallback
            dist.recv(buf, src=prv)  # expect: nccl_payload fallback
        else:
            dist.recv(buf, src=prv)  # expect: nccl_payload fallback
            dist.send(acc.to(x.dtype), dst=nxt)  # expect: nccl_payload fallback
        acc = buf.float() + chunks[recv_idx].float()
    return acc.to(x.dtype)


def solution(grads: torch.Tensor) -> torch.Tensor:
    world, rank = dist.get_world_size(), dist.get_rank()
    if world == 1:
        return grads.clone()
    if world <= 2:
        return _pairwise(grads, rank)
    return _ring(grads, rank, world)
