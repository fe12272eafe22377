import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_SYM = {}


def _get(x: torch.Tensor):
    key = (x.numel(), x.dtype)
    if key in _SYM:
        return _SYM[key]
    buf = symm_mem.empty(x.numel(), dtype=x.dtype, device=x.device)  # expect: rendezvous setup
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD.group_name)  # expect: rendezvous setup
    _SYM[key] = (buf, hdl)
    return buf, hdl


def solution(x: torch.Tensor) -> torch.Tensor:
    rank = dist.get_rank()
    world = dist.get_world_size()
    n = x.numel()
    out = torch.empty((world, n), dtype=x.dtype, device=x.device)
    try:
        buf, hdl = _get(x)
        buf.copy_(x.flatten())
        hdl.barrier()
        for p in range(world):
            out[p].copy_(hdl.get_buffer(p, (n,), x.dtype))  # expect: copy_engine hot
        hdl.barrier()
    except (RuntimeError, AttributeError):
        dist.all_gather_into_tensor(out, x.flatten())  # expect: nccl_payload fallback
        err = torch.ones(1, device=x.device)
        dist.all_reduce(err)  # expect: nccl_metadata fallback
    finally:
        dist.barrier()  # expect: nccl_metadata hot
    return out.view((world,) + tuple(x.shape)).mean(dim=0)
