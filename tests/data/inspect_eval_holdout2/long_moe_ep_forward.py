"""Expert-parallel MoE forward (one expert per rank, top-2): router -> count exchange ->
dispatch into each expert rank's symmetric inbox -> expert FFN -> NCCL combine."""
import functools
import os
from dataclasses import dataclass, field
from typing import Optional

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
import torch.nn.functional as F

_TOP_K = 2
_CAPACITY_FACTOR = 2.0
_DEBUG_SYNC = False
_TRACE = os.environ.get("MOE_EP_TRACE") is not None

@dataclass
class _Plan:
    world: int
    rank: int
    capacity: int
    counts: Optional[torch.Tensor] = field(default=None)
    recv_counts: Optional[torch.Tensor] = field(default=None)

@functools.lru_cache(maxsize=2)
def _inbox(world: int, capacity: int, hidden: int, dtype: torch.dtype, dev: int):
    device = torch.device("cuda", dev)
    buf = symm_mem.empty((world, capacity, hidden), dtype=dtype, device=device)  # expect: rendezvous setup
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD.group_name)  # expect: rendezvous setup
    return buf, hdl

def _route(x: torch.Tensor, gate_w: torch.Tensor, world: int):
    logits = x.float() @ gate_w[:world].float().t()  # [T, E] with E == world
    probs = torch.softmax(logits, dim=-1)
    topv, topi = probs.topk(_TOP_K, dim=-1)
    return topv / topv.sum(-1, keepdim=True), topi

def _exchange_counts(plan: _Plan, topi: torch.Tensor) -> None:
    plan.counts = torch.bincount(topi.reshape(-1), minlength=plan.world)
    plan.recv_counts = torch.empty_like(plan.counts)
    dist.all_to_all_single(plan.recv_counts, plan.counts)  # expect: nccl_metadata hot
    if _TRACE:
        seen = [None] * plan.world
        dist.all_gather_object(seen, plan.counts.tolist())  # expect: nccl_metadata fallback
        print(f"[rank {plan.rank}] routing {seen}")

def _dispatch(plan: _Plan, x: torch.Tensor, topi: torch.Tensor, buf, hdl):
    flat_e = topi.reshape(-1)
    tok = torch.arange(x.shape[0], device=x.device).repeat_interleave(_TOP_K)
    order = torch.argsort(flat_e, stable=True)
    sorted_x = x[tok[order]]
    counts = plan.counts.tolist()
    hdl.barrier(channel=0)
    start = 0
    for e in range(plan.world):
        n = min(counts[e], plan.capacity)
        inbox = hdl.get_buffer(e, buf.shape, buf.dtype)
        inbox[plan.rank, :n] = sorted_x[start:start + n]  # expect: copy_engine hot
        start += counts[e]
    hdl.barrier(channel=1)
    return order, tok

def _expert(tokens: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    return F.silu(tokens @ w1.t()) @ w2.t()

def _combine(plan: _Plan, expert_out: torch.Tensor) -> torch.Tensor:
    world, cap, hidden = expert_out.shape
    recv_counts = [min(c, cap) for c in plan.recv_counts.tolist()]
    send = torch.cat([expert_out[r, : recv_counts[r]] for r in range(world)])
    out_splits = [min(c, cap) for c in plan.counts.tolist()]
    back = send.new_empty((sum(out_splits), hidden))
    dist.all_to_all_single(  # expect: nccl_payload hot
        back, send, output_split_sizes=out_splits, input_split_sizes=recv_counts
    )
    return back

def solution(x: torch.Tensor, gate_w: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    if not dist.is_initialized():
        dist.init_process_group("nccl")  # expect: nccl_metadata fallback
    world, rank = dist.get_world_size(), dist.get_rank()
    T, H = x.shape
    cap = int(_CAPACITY_FACTOR * T * _TOP_K / world)
    plan = _Plan(world, rank, cap)
    topv, topi = _route(x, gate_w, world)
    _exchange_counts(plan, topi)
    buf, hdl = _inbox(world, cap, H, x.dtype, x.device.index)
    order, tok = _dispatch(plan, x, topi, buf, hdl)
    y = _expert(buf.view(world * cap, H), w1, w2).view(world, cap, H)
    if _DEBUG_SYNC:
        torch.cuda.synchronize()
        dist.barrier()  # expect: nccl_metadata fallback
    back = _combine(plan, y)
    # undo the expert sort and apply the gate weights (assumes no expert overflowed)
    out = torch.zeros((T, H), dtype=torch.float32, device=x.device)
    w = topv.reshape(-1)[order][: back.shape[0]]
    out.index_add_(0, tok[order][: back.shape[0]], back.float() * w[:, None])
    return out.to(x.dtype)
