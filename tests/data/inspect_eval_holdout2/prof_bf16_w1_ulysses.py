# profile: dtype=bfloat16 world_size=1
"""Ulysses sequence parallelism, gather-sequence / scatter-heads:
[S/W, H*D] -> [S, H/W, D] with one all_to_all over the SP group."""
import functools

import torch
import torch.distributed as dist


@functools.lru_cache(maxsize=None)
def _sp_group(world: int):
    return dist.new_group(ranks=list(range(world)), backend="nccl")  # expect: nccl_metadata setup


def _a2a(x: torch.Tensor, scatter_dim: int, gather_dim: int, group, world: int) -> torch.Tensor:
    inputs = [t.contiguous() for t in torch.tensor_split(x, world, scatter_dim)]
    outputs = [torch.empty_like(t) for t in inputs]
    dist.all_to_all(outputs, inputs, group=group)  # expect: nccl_payload fallback
    return torch.cat(outputs, dim=gather_dim).contiguous()


def solution(x: torch.Tensor, num_heads: int = 16) -> torch.Tensor:
    world = dist.get_world_size()
    group = _sp_group(world)
    s_local, hidden = x.shape
    xh = x.view(s_local, num_heads, hidden // num_heads)
    if world == 1:
        return xh
    if num_heads % world != 0:
        raise ValueError("num_heads must be divisible by the SP degree")
    out = _a2a(xh, 1, 0, group, world)
    dist.barrier(group=group)  # expect: nccl_metadata fallback
    return out
