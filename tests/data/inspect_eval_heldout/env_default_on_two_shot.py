"""All-reduce via PyTorch's two-shot symmetric-memory kernel. PKB_USE_SYMM defaults
to on; PKB_DISABLE_CUSTOM (unset by default) forces NCCL for debugging."""
import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_USE_SYMM = os.getenv("PKB_USE_SYMM", "1") == "1"
_buffers = {}


def _symm_buffer(numel: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    key = (numel, dtype)
    if key in _buffers:
        return _buffers[key]
    buf = symm_mem.empty(numel, dtype=dtype, device=device)  # expect: rendezvous setup
    symm_mem.rendezvous(buf, dist.group.WORLD.group_name)  # expect: rendezvous setup
    _buffers[key] = buf
    return buf


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    if os.environ.get("PKB_DISABLE_CUSTOM"):
        out = tensor.clone()
        dist.all_reduce(out)  # expect: nccl_payload fallback
        return out
    if _USE_SYMM:
        buf = _symm_buffer(tensor.numel(), tensor.dtype, tensor.device)
        buf.copy_(tensor.reshape(-1))
        torch.ops.symm_mem.two_shot_all_reduce_(buf, "sum", dist.group.WORLD.group_name)
        return buf.view_as(tensor).clone()
    else:
        out = tensor.clone()
        dist.all_reduce(out)  # expect: nccl_payload fallback
        return out
