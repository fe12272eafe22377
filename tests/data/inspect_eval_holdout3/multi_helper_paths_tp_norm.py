import torch
import torch.distributed as dist

_WARM = {}


def _global_sumsq(t: torch.Tensor) -> torch.Tensor:
    s = t.float().pow(2).sum()
    dist.all_reduce(s)  # expect: nccl_metadata hot
    return s


def _gather_rows(t: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    out = torch.empty((world * t.shape[0], t.shape[1]), dtype=t.dtype, device=t.device)
    dist.all_gather_into_tensor(out, t.contiguous())  # expect: nccl_payload setup
    return out


def _warmup(x: torch.Tensor):
    if "done" in _WARM:
        return
    _gather_rows(x[:8])
    _WARM["done"] = True


def solution(x: torch.Tensor, gamma: torch.Tensor) -> torch.Tensor:
    _warmup(x)
    if x.dtype == torch.float32:
        # fp32 reference path: full gather, then a plain RMSNorm
        full = _gather_rows(x)
        rms = (_global_sumsq(full) / full.numel()).sqrt()
        return (x / rms) * gamma
    try:
        sumsq = _global_sumsq(x)
    except RuntimeError:
        full = _gather_rows(x)
        sumsq = full.float().pow(2).sum()
    n = torch.tensor([x.numel()], dtype=torch.float32, device=x.device)
    dist.all_reduce(n)  # expect: nccl_metadata hot
    rms = (sumsq / n).sqrt()
    return (x.float() / rms * gamma.float()).to(x.dtype)
