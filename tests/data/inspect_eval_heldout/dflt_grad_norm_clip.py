"""Distributed gradient-norm clipping (FSDP-style sharded grads).

Local p-norm contributions are reduced across ranks, the clip coefficient is
applied in place with foreach kernels."""
import math
from typing import List

import torch
import torch.distributed as dist


def _local_pow_sum(grads: List[torch.Tensor], p: float) -> torch.Tensor:
    norms = torch._foreach_norm([g.float() for g in grads], p)
    return torch.stack(norms).pow(p).sum()


@torch.no_grad()
def solution(
    grads: List[torch.Tensor],
    max_norm: float,
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
) -> torch.Tensor:
    grads = [g for g in grads if g is not None]
    p = float(norm_type)
    if p == math.inf:
        total = torch.stack([g.abs().max().float() for g in grads]).max()
        dist.all_reduce(total, op=dist.ReduceOp.MAX)  # expect: nccl_metadata fallback
    else:
        total = _local_pow_sum(grads, p)
        dist.all_reduce(total, op=dist.ReduceOp.SUM)  # expect: nccl_metadata hot
        total = total.pow(1.0 / p)

    if error_if_nonfinite:
        bad = (~torch.isfinite(total)).to(torch.int32)
        dist.all_reduce(bad, op=dist.ReduceOp.MAX)  # expect: nccl_metadata fallback
        if bad.item():
            raise RuntimeError(f"non-finite total norm {total.item()}")

    coef = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    torch._foreach_mul_(grads, coef.to(grads[0].dtype))
    return total
