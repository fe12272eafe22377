import functools

import torch
import torch.distributed as dist
import triton
import triton.language as tl


@triton.jit
def _rmsnorm(x_ptr, w_ptr, out_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < N
    x = tl.load(x_ptr + row * N + cols, mask=m, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
    r = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
    tl.store(out_ptr + row * N + cols, (x * r * w).to(tl.bfloat16), mask=m)


@functools.lru_cache(maxsize=None)
def _norm_weight(n: int, device: torch.device) -> torch.Tensor:
    w = torch.ones(n, dtype=torch.bfloat16, device=device)
    if dist.get_rank() == 0:
        w.add_(torch.linspace(-0.01, 0.01, n, device=device).to(w.dtype))
    dist.broadcast(w, src=0)  # expect: nccl_payload setup
    return w


def solution(x: torch.Tensor) -> torch.Tensor:
    """Reduce-scatter the rows, then RMS-norm the local shard with a shared weight."""
    world = dist.get_world_size()
    shard = torch.empty(x.shape[0] // world, x.shape[1], dtype=x.dtype, device=x.device)
    dist.reduce_scatter_tensor(shard, x.contiguous())  # expect: nccl_payload hot
    w = _norm_weight(x.shape[1], x.device)
    out = torch.empty_like(shard)
    _rmsnorm[(shard.shape[0],)](shard, w, out, shard.shape[1], 1e-6, BLOCK=triton.next_power_of_2(shard.shape[1]))
    return out
