import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem


def solution(x: torch.Tensor) -> torch.Tensor:
    buf = symm_mem.empty(x.numel(), device=x.device, dtype=x.dtype)
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
    buf.copy_(x.view(-1))
    hdl.barrier()
    acc = x.clone().view(-1)
    for p in range(hdl.world_size):
        if p != hdl.rank:
            acc += hdl.get_buffer(p, buf.shape, buf.dtype)
    return acc.view_as(x)
