import torch
import torch.distributed as dist

FP8_MAX = 448.0
ALIGN = 256


def _ag_fp8(x: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    amax = x.abs().amax().float().reshape(1)
    dist.all_reduce(amax, op=dist.ReduceOp.MAX)  # expect: nccl_metadata hot
    scale = FP8_MAX / amax.clamp_min(1e-12)
    q = (x.float() * scale).to(torch.float8_e4m3fn).view(torch.uint8)
    out = torch.empty((world * q.shape[0], q.shape[1]), dtype=torch.uint8, device=x.device)
    dist.all_gather_into_tensor(out, q)  # expect: nccl_payload hot
    return (out.view(torch.float8_e4m3fn).float() / scale).to(x.dtype)


def solution(x: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    if x.numel() % 16 != 0 or x.data_ptr() % ALIGN != 0:
        out = [torch.empty_like(x) for _ in range(world)]
        dist.all_gather(out, x)  # expect: nccl_payload fallback
        return torch.cat(out)
    if x.numel() < 4096:
        # tiny messages: a row count check, then plain NCCL
        rows = torch.tensor([x.shape[0]], device=x.device)
        dist.all_reduce(rows, op=dist.ReduceOp.MAX)  # expect: nccl_metadata fallback
        full = torch.empty((world * x.shape[0], x.shape[1]), dtype=x.dtype, device=x.device)
        dist.all_gather_into_tensor(full, x)  # expect: nccl_payload fallback
        return full
    return _ag_fp8(x)
