import torch
import torch.distributed as dist

_FAST = (torch.bfloat16, torch.float16, torch.float32)


def solution(x: torch.Tensor) -> torch.Tensor:
    """All-gather then reduce-scatter through the traceable _c10d_functional ops."""
    world = dist.get_world_size()
    group_name = dist.group.WORLD.group_name
    if x.dtype not in _FAST:
        out = torch.empty_like(x)
        dist.reduce_scatter_tensor(out, torch.cat([x] * world))  # expect: nccl_payload fallback
        return out
    g = torch.ops._c10d_functional.all_gather_into_tensor(x.contiguous(), world, group_name)  # expect: nccl_payload hot
    g = torch.ops._c10d_functional.wait_tensor(g)
    mixed = g.view(world, *x.shape).flip(0).reshape(world * x.shape[0], *x.shape[1:])
    rs = torch.ops._c10d_functional.reduce_scatter_tensor(mixed, "sum", world, group_name)  # expect: nccl_payload hot
    return torch.ops._c10d_functional.wait_tensor(rs)
