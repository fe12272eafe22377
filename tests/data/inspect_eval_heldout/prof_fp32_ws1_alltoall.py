# profile: dtype=float32 world_size=1
"""All-to-all of fp32 activations through symmetric memory, with torch copies
pulling chunk `rank` out of each peer's buffer."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_initialized = False
_sym = {}


def _init_once() -> None:
    global _initialized
    if not _initialized:
        torch.cuda.set_device(dist.get_rank() % torch.cuda.device_count())
        dist.barrier()  # expect: nccl_metadata setup
        _initialized = True


def _sym_buffer(x: torch.Tensor):
    if x.numel() not in _sym:
        buf = symm_mem.empty(x.numel(), dtype=x.dtype, device=x.device)  # expect: rendezvous fallback
        _sym[x.numel()] = (buf, symm_mem.rendezvous(buf, dist.group.WORLD.group_name))  # expect: rendezvous fallback
    return _sym[x.numel()]


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    _init_once()
    world = dist.get_world_size()
    if world == 1:
        return tensor.clone()
    if tensor.dtype != torch.float32:
        out = torch.empty_like(tensor)
        dist.all_to_all_single(out, tensor.contiguous())  # expect: nccl_payload fallback
        return out

    rank = dist.get_rank()
    buf, hdl = _sym_buffer(tensor)
    buf.copy_(tensor.reshape(-1))
    hdl.barrier(channel=0)
    chunk = tensor.numel() // world
    out = torch.empty_like(tensor).view(-1)
    for r in range(world):
        src = hdl.get_buffer(r, (tensor.numel(),), tensor.dtype)
        out[r * chunk:(r + 1) * chunk].copy_(src[rank * chunk:(rank + 1) * chunk])  # expect: copy_engine fallback
    hdl.barrier(channel=1)
    return out.view_as(tensor)
