"""The size rule (issue 32): a collective whose sent tensor has a bounded element count is
metadata (`# size:` its bound); the payload look-alikes are sized by an input."""
import torch
import torch.distributed as dist

NUM_EXPERTS = 64


def _flags(x: torch.Tensor) -> torch.Tensor:
    return torch.zeros(2, dtype=torch.int32, device=x.device)


def _global_sum(t: torch.Tensor) -> torch.Tensor:
    dist.all_reduce(t)  # size: 2 x float32
    return t


def solution(x: torch.Tensor, idx: torch.Tensor, n: int, k: int = 4) -> torch.Tensor:
    world = dist.get_world_size()
    dist.all_reduce(torch.empty(1, device=x.device))  # size: 1 x float32
    counts = torch.zeros(world, dtype=torch.int64, device=x.device)
    counts.add_(1)
    gathered = torch.empty(world * world, dtype=torch.int64, device=x.device)
    dist.all_gather_into_tensor(gathered, counts)  # size: 8 x int64
    dist.all_reduce(torch.full((2 * world,), 0, device=x.device))  # size: 16 x int64
    dist.all_reduce(torch.ones(NUM_EXPERTS, device=x.device))  # size: 64 x float32
    peak = x.abs().max()
    dist.all_reduce(peak, op=dist.ReduceOp.MAX)  # size: 1 x bfloat16
    dist.all_reduce(torch.linalg.vector_norm(x.float()))  # size: 1 x float32
    send = torch.bincount(idx, minlength=world)
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)  # size: 8 x int64
    dist.all_reduce(torch.tensor([0] * world, device=x.device))  # size: 8 x int64
    dist.all_reduce(torch.tensor([float(x.sum())], device=x.device))  # size: 1 x float32
    flag = torch.zeros(1, device=x.device)
    flag.fill_(1)
    dist.all_reduce(flag.view(-1).long())  # size: 1 x int64
    dist.all_reduce(_flags(x))  # size: 2 x int32
    dist.all_reduce(torch.zeros(k))  # size: 4 x float32
    total = _global_sum(torch.stack([x.float().sum(), x.float().norm()]))
    norm_sq = x.float().pow(2).sum() / world
    dist.all_reduce(norm_sq)  # size: 1 x float32
    parts = []
    for r in range(world):
        parts.append(x[r].float().sum())
    dist.all_reduce(torch.stack(parts))  # size: 8 x float32
    # payload: sized by an input, or by a size the rule cannot bound
    dist.all_reduce(torch.empty_like(x))  # payload
    dist.all_reduce(x.sum(dim=0))  # payload
    dist.all_reduce(torch.empty(n, device=x.device))  # payload
    dist.all_reduce(x[:4])  # payload
    dist.all_reduce(torch.empty(x.shape[0], device=x.device))  # payload
    dist.all_reduce(torch.zeros(int(x.sum().item()), device=x.device))  # payload
    dist.all_reduce(torch.empty(8192, device=x.device))  # payload
    dist.all_reduce(x.view(-1))  # payload
    return x * total[0]
