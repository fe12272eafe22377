import random

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_SYM = {}


def _sym(x: torch.Tensor):
    if "h" not in _SYM:
        _SYM["b"] = symm_mem.empty((dist.get_world_size(),) + tuple(x.shape), dtype=x.dtype, device=x.device)  # expect: rendezvous unknown
        _SYM["h"] = symm_mem.rendezvous(_SYM["b"], dist.group.WORLD.group_name)  # expect: rendezvous unknown
    return _SYM["b"], _SYM["h"]


def solution(x: torch.Tensor, p_exchange: float = 0.5) -> torch.Tensor:
    rank = dist.get_rank()
    world = dist.get_world_size()
    # stochastic expert re-balancing: only some steps exchange replicas
    if random.random() < p_exchange:
        buf, hdl = _sym(x)
        hdl.barrier()
        for off in range(1, world):
            peer = (rank + off) % world
            remote = hdl.get_buffer(peer, (world,) + tuple(x.shape), x.dtype)
            remote[rank].copy_(x)  # expect: copy_engine unknown
        hdl.barrier()
        merged = buf.sum(dim=0) - buf[rank] + x
    else:
        merged = x.clone()
        dist.all_reduce(merged)  # expect: nccl_payload unknown
    drop = torch.tensor([random.random() < 0.1], dtype=torch.int32, device=x.device)
    dist.broadcast(drop, src=0)  # expect: nccl_metadata hot
    return merged * (1 - drop).to(x.dtype)
