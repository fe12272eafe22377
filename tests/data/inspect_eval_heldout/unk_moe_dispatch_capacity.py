"""MoE token dispatch (expert parallel, top-1). Tokens are sent to the rank owning
their expert. If no (src, dst) pair exceeds the slot capacity, tokens are staged in
fixed slots of a symmetric buffer and receivers pull them over NVLink; otherwise a
variable-size NCCL all_to_all is used."""
from typing import Tuple

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_CAPACITY = 256
_slots = {}


def _slot_buffer(world: int, hidden: int, dtype: torch.dtype, device: torch.device):
    key = (world, hidden, dtype)
    if key not in _slots:
        buf = symm_mem.empty(world, _CAPACITY, hidden, dtype=dtype, device=device)  # expect: rendezvous unknown
        _slots[key] = (buf, symm_mem.rendezvous(buf, dist.group.WORLD.group_name))  # expect: rendezvous unknown
    return _slots[key]


@torch.no_grad()
def solution(hidden_states: torch.Tensor, router_logits: torch.Tensor,
             num_experts: int = 64) -> Tuple[torch.Tensor, torch.Tensor]:
    rank, world = dist.get_rank(), dist.get_world_size()
    tokens, hidden = hidden_states.shape
    expert = router_logits.float().argmax(dim=-1) % num_experts
    dest = expert // (num_experts // world)
    order = torch.argsort(dest, stable=True)
    send_counts = torch.bincount(dest, minlength=world)
    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts)  # expect: nccl_metadata hot
    peak = torch.maximum(send_counts.max(), recv_counts.max())
    dist.all_reduce(peak, op=dist.ReduceOp.MAX)  # expect: nccl_metadata hot

    send = hidden_states[order]
    sc, rc = send_counts.tolist(), recv_counts.tolist()
    out = hidden_states.new_empty((sum(rc), hidden))
    if int(peak) <= _CAPACITY:
        buf, hdl = _slot_buffer(world, hidden, hidden_states.dtype, hidden_states.device)
        start = 0
        for r in range(world):
            buf[r, :sc[r]].copy_(send[start:start + sc[r]])
            start += sc[r]
        hdl.barrier(channel=0)
        pos = 0
        for r in range(world):
            peer = hdl.get_buffer(r, (world, _CAPACITY, hidden), hidden_states.dtype)
            out[pos:pos + rc[r]] = peer[rank, :rc[r]]  # expect: copy_engine unknown
            pos += rc[r]
        hdl.barrier(channel=1)
    else:
        dist.all_to_all_single(out, send, output_split_sizes=rc, input_split_sizes=sc)  # expect: nccl_payload unknown
    return out, recv_counts
