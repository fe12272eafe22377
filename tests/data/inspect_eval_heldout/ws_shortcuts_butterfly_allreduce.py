"""Recursive-doubling all-reduce over symmetric memory: log2(W) rounds, in round k
each rank adds the buffer of rank ^ 2^k, copied over NVLink with torch copies.
Needs a power-of-two world larger than 2; small or odd worlds use NCCL."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_ws = {}


def _workspace(x: torch.Tensor):
    key = (x.numel(), x.dtype)
    if key not in _ws:
        buf = symm_mem.empty(2, x.numel(), dtype=torch.float32, device=x.device)  # expect: rendezvous setup
        hdl = symm_mem.rendezvous(buf, dist.group.WORLD.group_name)  # expect: rendezvous setup
        _ws[key] = (buf, hdl)
    return _ws[key]


def _nccl_allreduce(x: torch.Tensor) -> torch.Tensor:
    out = x.clone()
    dist.all_reduce(out)  # expect: nccl_payload fallback
    return out


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    if world == 1:
        return tensor.clone()
    if world <= 2 or world & (world - 1):
        return _nccl_allreduce(tensor)

    rank = dist.get_rank()
    n = tensor.numel()
    buf, hdl = _workspace(tensor)
    acc = tensor.reshape(-1).float()
    incoming = torch.empty_like(acc)
    dist_k = 1
    slot = 0
    while dist_k < world:
        partner = rank ^ dist_k
        buf[slot].copy_(acc)
        hdl.barrier(channel=slot)
        peer_buf = hdl.get_buffer(partner, (2, n), torch.float32)
        incoming.copy_(peer_buf[slot])  # expect: copy_engine hot
        acc += incoming
        dist_k <<= 1
        slot ^= 1
    hdl.barrier(channel=2)
    return acc.to(tensor.dtype).view_as(tensor)
