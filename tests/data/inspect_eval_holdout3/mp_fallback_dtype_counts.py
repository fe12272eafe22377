import torch
import torch.distributed as dist


def _a2a_padded(x: torch.Tensor) -> torch.Tensor:
    # equal chunks: no counts needed
    out = torch.empty_like(x)
    dist.all_to_all_single(out, x)  # expect: nccl_payload hot
    return out


def _a2a_exact_fp32(x: torch.Tensor, dest: torch.Tensor, world: int) -> torch.Tensor:
    counts = torch.zeros(world, dtype=torch.long, device=x.device)
    counts.index_add_(0, dest, torch.ones_like(dest))
    recv = torch.empty_like(counts)
    dist.all_to_all_single(recv, counts)  # expect: nccl_metadata fallback
    order = torch.argsort(dest)
    out = x.new_empty((int(recv.sum()), x.shape[1]))
    dist.all_to_all_single(out, x[order], recv.tolist(), counts.tolist())  # expect: nccl_payload fallback
    return out


def solution(x: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    dest = (x.float().sum(dim=1) * 31).long().abs() % world
    if x.dtype == torch.float32:
        y = _a2a_exact_fp32(x, dest, world)
    else:
        y = _a2a_padded(x)
    n = torch.tensor(y.shape[0], device=x.device)
    dist.all_reduce(n)  # expect: nccl_metadata hot
    return y[: x.shape[0]] * (n > 0).to(y.dtype)
