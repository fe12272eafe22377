"""Push-based all-gather; allocates and rendezvous-es its buffer on every call."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem


def _alloc(x, world):
    buf = symm_mem.empty((world,) + tuple(x.shape), dtype=x.dtype, device=x.device)  # expect: rendezvous hot
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD)  # expect: rendezvous hot
    return buf, hdl


@torch.no_grad()
def solution(x: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    buf, hdl = _alloc(x, world)
    me = hdl.rank
    for peer in range(world):
        if peer == me:
            buf[me].copy_(x)
            continue
        remote = hdl.get_buffer(peer, buf.shape, buf.dtype)
        remote[me].copy_(x, non_blocking=True)  # expect: copy_engine hot
    torch.cuda.synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    return buf.view(world * x.shape[0], *x.shape[1:]).clone()
