# profile: dtype=bfloat16 world_size=1
"""Broadcast from `src` via symmetric memory: the source rank publishes its tensor,
every other rank pulls it with a device copy from the source's buffer."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_ws = None


def _workspace(t: torch.Tensor):
    global _ws
    if _ws is None or _ws[0].shape != t.shape or _ws[0].dtype != t.dtype:
        buf = symm_mem.empty(t.shape, dtype=t.dtype, device=t.device)  # expect: rendezvous fallback
        hdl = symm_mem.rendezvous(buf, dist.group.WORLD.group_name)  # expect: rendezvous fallback
        _ws = (buf, hdl)
    return _ws


@torch.no_grad()
def solution(tensor: torch.Tensor, src: int = 0) -> torch.Tensor:
    if not tensor.is_cuda:
        out = tensor.clone()
        dist.broadcast(out, src=src)  # expect: nccl_payload fallback
        return out
    world = dist.get_world_size()
    if world == 1:
        return tensor.clone()

    rank = dist.get_rank()
    buf, hdl = _workspace(tensor)
    if rank == src:
        buf.copy_(tensor)
    hdl.barrier(channel=0)
    out = torch.empty_like(tensor)
    if rank == src:
        out.copy_(tensor)
    else:
        out.copy_(hdl.get_buffer(src, tensor.shape, tensor.dtype))  # expect: copy_engine fallback
    hdl.barrier(channel=1)
    return out
