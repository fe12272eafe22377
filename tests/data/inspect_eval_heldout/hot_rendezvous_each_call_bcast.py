"""Broadcast by pulling from the source rank's symmetric buffer.

The buffer itself is allocated once; rendezvous is called on every call because
PyTorch caches the handle per allocation, so repeated calls only do a lookup."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_bufs = {}


def _buffer(shape, dtype, device) -> torch.Tensor:
    key = (tuple(shape), dtype)
    if key not in _bufs:
        _bufs[key] = symm_mem.empty(shape, dtype=dtype, device=device)  # expect: rendezvous setup
    return _bufs[key]


@torch.no_grad()
def solution(tensor: torch.Tensor, src: int = 0) -> torch.Tensor:
    rank = dist.get_rank()
    buf = _buffer(tensor.shape, tensor.dtype, tensor.device)
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD.group_name)  # expect: rendezvous hot
    if rank == src:
        buf.copy_(tensor)
    hdl.barrier(channel=0)
    if rank == src:
        out = tensor.clone()
    else:
        out = torch.empty_like(tensor)
        out.copy_(hdl.get_buffer(src, tensor.shape, tensor.dtype))  # expect: copy_engine hot
    hdl.barrier(channel=1)
    return out
