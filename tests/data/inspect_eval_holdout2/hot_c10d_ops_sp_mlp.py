"""Megatron sequence-parallel MLP block: all-gather the sequence shard,
column-parallel fc1 + GeLU, row-parallel fc2, and a reduce-scatter back to the
sequence shard. Collectives are issued as torch.ops._c10d_functional ops so the
block stays traceable."""
import torch
import torch.distributed as dist
import torch.nn.functional as F

_c10d = torch.ops._c10d_functional


def _group_name() -> str:
    return dist.group.WORLD.group_name


def _mlp(full: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    h = F.gelu(full @ w1.t(), approximate="tanh")
    return h @ w2.t()


def solution(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    if world == 1:
        return _mlp(x, w1, w2)
    name = _group_name()
    full = _c10d.all_gather_into_tensor(x.contiguous(), world, name)  # expect: nccl_payload hot
    full = _c10d.wait_tensor(full)
    y = _mlp(full, w1, w2)
    out = torch.ops._c10d_functional.reduce_scatter_tensor(y, "sum", world, name)  # expect: nccl_payload hot
    out = torch.ops._c10d_functional.wait_tensor(out)
    return out
