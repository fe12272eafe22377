"""Megatron RowParallelLinear forward: local GEMM on the input shard, then a
symmetric-memory one-shot all-reduce (Triton kernel pulls every peer's partial)."""
import dataclasses
from typing import Optional

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
import triton
import triton.language as tl


@dataclasses.dataclass
class _SymmState:
    buf: Optional[torch.Tensor] = None
    hdl: object = None
    ptrs: Optional[torch.Tensor] = None
    capacity: int = 0


_STATE = _SymmState()


@triton.jit
def _sum_peers(ptr_table, out_ptr, n, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for r in tl.static_range(WORLD):
        src = tl.load(ptr_table + r).to(tl.pointer_type(tl.bfloat16))
        acc += tl.load(src + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + offs, acc.to(tl.bfloat16), mask=mask)


def _state_for(numel: int, device: torch.device) -> _SymmState:
    if _STATE.buf is None or _STATE.capacity < numel:
        _STATE.buf = symm_mem.empty(numel, dtype=torch.bfloat16, device=device)  # expect: rendezvous setup
        _STATE.hdl = symm_mem.rendezvous(_STATE.buf, dist.group.WORLD.group_name)  # expect: rendezvous setup
        _STATE.ptrs = torch.tensor(_STATE.hdl.buffer_ptrs, dtype=torch.int64, device=device)
        _STATE.capacity = numel
    return _STATE


def solution(input_parallel: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    partial = torch.matmul(input_parallel, weight.t())
    if partial.dtype != torch.bfloat16 or dist.get_world_size() == 1:
        if dist.get_world_size() > 1:
            dist.all_reduce(partial)  # expect: nccl_payload fallback
        return partial
    n = partial.numel()
    st = _state_for(n, partial.device)
    st.buf[:n].copy_(partial.reshape(-1))
    st.hdl.barrier(channel=0)
    out = torch.empty_like(partial)
    BLOCK = 4096
    grid = (triton.cdiv(n, BLOCK),)
    _sum_peers[grid](st.ptrs, out, n, WORLD=dist.get_world_size(), BLOCK=BLOCK)
    st.hdl.barrier(channel=1)
    return out
