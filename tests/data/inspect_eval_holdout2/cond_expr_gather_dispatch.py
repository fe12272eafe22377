"""All-gather of tensor/sequence-parallel activations. 16-bit CUDA tensors are
pushed to every peer's symmetric buffer by slice assignment (copy engine); other
tensors use NCCL. The implementation is picked with conditional expressions."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_BUFS = {}


def _nccl_gather(x: torch.Tensor) -> torch.Tensor:
    out = x.new_empty((dist.get_world_size() * x.shape[0],) + tuple(x.shape[1:]))
    dist.all_gather_into_tensor(out, x.contiguous())  # expect: nccl_payload fallback
    return out


def _ce_gather(x: torch.Tensor) -> torch.Tensor:
    world, rank = dist.get_world_size(), dist.get_rank()
    key = (tuple(x.shape), x.dtype)
    if key not in _BUFS:
        b = symm_mem.empty((world,) + tuple(x.shape), dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        _BUFS[key] = (b, symm_mem.rendezvous(b, dist.group.WORLD.group_name))  # expect: rendezvous setup
    buf, hdl = _BUFS[key]
    hdl.barrier(channel=0)
    for i in range(1, world):
        peer = (rank + i) % world
        hdl.get_buffer(peer, buf.shape, buf.dtype)[rank] = x  # expect: copy_engine hot
    buf[rank].copy_(x)
    hdl.barrier(channel=1)
    return buf.reshape(-1, *x.shape[1:]).clone()


def solution(x: torch.Tensor) -> torch.Tensor:
    half = x.dtype in (torch.float16, torch.bfloat16)
    gather = _ce_gather if half and x.is_cuda else _nccl_gather
    return gather(x) if dist.get_world_size() > 1 else x.clone()
