"""FP8-compressed all-reduce: quantise with a global amax, all-gather the bytes, reduce locally."""
import torch
import torch.distributed as dist
import triton
import triton.language as tl


@triton.jit
def _quant(x_ptr, q_ptr, scale_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    s = tl.load(scale_ptr)
    v = tl.load(x_ptr + offs, mask=m).to(tl.float32) / s
    tl.store(q_ptr + offs, v.to(tl.float8e4nv), mask=m)


def solution(x: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    flat = x.reshape(-1)
    amax = flat.abs().amax().float().reshape(1)
    try:
        q = torch.empty(flat.numel(), dtype=torch.float8_e4m3fn, device=x.device)
    except torch.cuda.OutOfMemoryError:
        out = x.clone()
        dist.all_reduce(out)  # expect: nccl_payload fallback
        return out
    else:
        dist.all_reduce(amax, op=dist.ReduceOp.MAX)  # expect: nccl_metadata hot
    scale = (amax / 448.0).clamp_min(1e-12)
    n = flat.numel()
    _quant[(triton.cdiv(n, 2048),)](flat, q, scale, n, BLOCK=2048)
    gathered = torch.empty(world, n, dtype=torch.float8_e4m3fn, device=x.device)
    dist.all_gather_into_tensor(gathered.view(torch.uint8), q.view(torch.uint8))  # expect: nccl_payload hot
    out = (gathered.float() * scale).sum(0)
    return out.to(x.dtype).view_as(x)
