"""PKB 21 (clip_grad_norm_no_ep), plain PyTorch restructured: foreach kernels, no host sync.

The reference launches a cast + norm + pow + add per gradient, then decides on the host
whether to clip (`if total_norm > max_norm` reads the GPU value: a device-to-host sync every
call). Here the per-tensor norms come from one multi-tensor kernel (torch._foreach_norm with
fp32 accumulation), the p-th powers are summed on the device, all-reduced over the FSDP group,
and the clip coefficient is clamped to 1.0 on the device (max_norm / total_norm when the norm
exceeds max_norm, else exactly 1.0: the same result as the reference's branch) and applied
with one multi-tensor in-place multiply (torch._foreach_mul_ with a tensor scalar).

Timeline behaviour: eager PyTorch, a handful of multi-tensor launches, one NCCL all-reduce of
a scalar and no device-to-host synchronisation (the reference has one).
"""
from typing import List, Optional

import torch
import torch.distributed as dist


def solution(
    grad_tensors: List[torch.Tensor],
    max_norm: float,
    norm_type: float = 2.0,
    fsdp_group: Optional[dist.ProcessGroup] = None,
) -> torch.Tensor:
    p = float(norm_type)
    grads = [g for g in grad_tensors if g is not None]
    if grads:
        norms = torch._foreach_norm(grads, p, dtype=torch.float32)
        total_p = torch.stack(norms).pow_(p).sum()
    else:
        dev = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() \
            else torch.device("cpu")
        total_p = torch.zeros((), dtype=torch.float32, device=dev)

    if fsdp_group is not None:
        dist.all_reduce(total_p, op=dist.ReduceOp.SUM, group=fsdp_group)
    total_norm = total_p.pow_(1.0 / p)

    if grads:
        # coefficient on the device: min(max_norm / total_norm, 1); 1.0 leaves the grads as they are
        coef = torch.clamp(max_norm / total_norm, max=1.0)
        torch._foreach_mul_(grads, coef)
    return total_norm
