# profile: dtype=bfloat16 world_size=2
import torch
import torch.distributed as dist


def _ring(x: torch.Tensor) -> torch.Tensor:
    rank = dist.get_rank()
    world = dist.get_world_size()
    acc = x.float().clone()
    cur = x.contiguous()
    for _ in range(world - 1):
        nxt = torch.empty_like(cur)
        ops = [
            dist.P2POp(dist.isend, cur, (rank + 1) % world),
            dist.P2POp(dist.irecv, nxt, (rank - 1) % world),
        ]
        for r in dist.batch_isend_irecv(ops):  # expect: nccl_payload fallback
            r.wait()
        acc += nxt.float()
        cur = nxt
    return acc


def solution(x: torch.Tensor) -> torch.Tensor:
    rank = dist.get_rank()
    world = dist.get_world_size()
    if world <= 2:
        # a pair: one exchange with the partner
        other = torch.empty_like(x)
        partner = 1 - rank
        if rank == 0:
            dist.send(x.contiguous(), dst=partner)  # expect: nccl_payload hot
            dist.recv(other, src=partner)  # expect: nccl_payload hot
        else:
            dist.recv(other, src=partner)  # expect: nccl_payload hot
            dist.send(x.contiguous(), dst=partner)  # expect: nccl_payload hot
        acc = x.float() + other.float()
    else:
        acc = _ring(x)
    norm = acc.norm()
    dist.all_reduce(norm, op=dist.ReduceOp.MAX)  # expect: nccl_metadata hot
    return (acc / norm.clamp_min(1e-6)).to(x.dtype)
