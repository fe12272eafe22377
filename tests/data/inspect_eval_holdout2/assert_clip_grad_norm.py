"""clip_grad_norm_ for one FSDP-sharded gradient (no expert parallelism).
The 2-norm path uses a Triton sum-of-squares kernel."""
import math

import torch
import torch.distributed as dist
import triton
import triton.language as tl


@triton.jit
def _sq_sum_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    tl.atomic_add(out_ptr, tl.sum(x * x, axis=0))


def _local_sq_norm(g: torch.Tensor) -> torch.Tensor:
    out = torch.zeros(1, dtype=torch.float32, device=g.device)
    BLOCK = 2048
    _sq_sum_kernel[(triton.cdiv(g.numel(), BLOCK),)](g, out, g.numel(), BLOCK=BLOCK)
    return out


def solution(grad: torch.Tensor, max_norm: float, norm_type: float = 2.0, group=None) -> torch.Tensor:
    assert grad.is_cuda and grad.is_contiguous(), "expects a contiguous CUDA gradient"
    assert grad.dtype in (torch.bfloat16, torch.float16, torch.float32), f"unsupported {grad.dtype}"
    assert dist.is_initialized(), "process group must be initialised"
    norm_type = float(norm_type)
    if math.isinf(norm_type):
        local = grad.abs().max().float().reshape(1)
        dist.all_reduce(local, op=dist.ReduceOp.MAX, group=group)  # expect: nccl_metadata fallback
        total = local
    elif norm_type == 2.0:
        local = _local_sq_norm(grad)
        dist.all_reduce(local, group=group)  # expect: nccl_metadata hot
        total = local.sqrt()
    else:
        local = grad.float().abs().pow(norm_type).sum().reshape(1)
        dist.all_reduce(local, group=group)  # expect: nccl_metadata fallback
        total = local.pow(1.0 / norm_type)
    coef = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    grad.mul_(coef.to(grad.dtype))
    return total.squeeze(0)
