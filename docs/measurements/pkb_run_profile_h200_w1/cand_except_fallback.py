"""Problem 1 (all-reduce): try a custom kernel, fall back to NCCL when it raises.

The custom op ``torch.ops.pkb_custom.all_reduce`` is registered nowhere, so every call takes
the fallback: an NCCL all-reduce of a clone.
"""

import torch
import torch.distributed as dist


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    try:
        return torch.ops.pkb_custom.all_reduce(tensor)
    except (AttributeError, RuntimeError):
        out = tensor.clone()
        dist.all_reduce(out, op=dist.ReduceOp.SUM)
        return out
