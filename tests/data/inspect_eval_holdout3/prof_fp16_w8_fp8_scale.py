# profile: dtype=float16 world_size=8
import torch
import torch.distributed as dist

E4M3_MAX = 448.0
E5M2_MAX = 57344.0


def solution(grad: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    if grad.dtype == torch.bfloat16:
        fmt, fmax = torch.float8_e4m3fn, E4M3_MAX
        amax = grad.abs().amax(dim=1, keepdim=True).float()
        dist.all_reduce(amax, op=dist.ReduceOp.MAX)  # expect: nccl_payload fallback
    elif grad.dtype == torch.float16:
        fmt, fmax = torch.float8_e5m2, E5M2_MAX
        amax = grad.abs().amax().float()
        dist.all_reduce(amax, op=dist.ReduceOp.MAX)  # expect: nccl_metadata hot
    else:
        out = grad.float().clone()
        dist.all_reduce(out)  # expect: nccl_payload fallback
        return (out / world).to(grad.dtype)
    scale = fmax / amax.clamp_min(1e-12)
    q = (grad.float() * scale).to(fmt).view(torch.uint8)
    parts = torch.empty((world,) + tuple(q.shape), dtype=torch.uint8, device=q.device)
    dist.all_gather_into_tensor(parts, q.unsqueeze(0))  # expect: nccl_payload hot
    deq = parts.view(fmt).float() / scale
    return (deq.sum(dim=0) / world).to(grad.dtype)
