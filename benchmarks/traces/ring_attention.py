"""PKB problems 54, 55 and 56 (causal ring attention: CP, TP x CP, CP x PP) at their tasks'
production presets, for ``pkbsim trace``.

PKB's input generator fixes 8 heads of 64 and derives the batch and the sequence from --m and
--n; the presets (``llama3-8b-32k``: one 32,768-token sequence, 32 heads of 128) need other
shapes. This file builds the references' arguments at any B, T, heads and head_dim, with the
process groups laid out as PKB's generator lays them (55: TP blocks of min(2, W) consecutive
ranks, CP across them; 56: CP blocks of W / pp consecutive ranks per stage, PP across them),
and calls the reference from a PKB checkout (``PKB_ROOT``, default ``.dev/pkb``); nothing of
PKB's is copied here. Trace the last rank (``--rank -1``): with a causal mask it computes every
block, rank 0 only its own.

    PKB_ROOT=.dev/pkb pkbsim trace benchmarks/traces/ring_attention.py:ring_cp \\
        --inputs inputs_cp --task 54 -w 8 --rank -1 --set B=1 --set T=32768 --set heads=32 \\
        --set head_dim=128 --mode fake --out /tmp/ring --programs tasks/traces
    (ring_tp with inputs_tp for 55, ring_pp with inputs_pp for 56)
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any

import torch
import torch.distributed as dist

REFERENCES = {54: "54_ring_attention.py", 55: "55_ring_attention_tp.py",
              56: "56_ring_attention_pp.py"}


def _solution(problem: int) -> Any:
    path = os.path.join(os.environ.get("PKB_ROOT", ".dev/pkb"), "reference",
                        REFERENCES[problem])
    spec = importlib.util.spec_from_file_location(f"pkb_reference_{problem}", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.solution


def _groups(rank: int, world_size: int, block: int) -> tuple[Any, Any]:
    """The group of ``block`` consecutive ranks holding ``rank``, and the group of the ranks at
    the same place in every block (every rank creates every group, as torch requires)."""
    mine_block = mine_across = None
    for first in range(0, world_size, block):
        g = dist.new_group(ranks=list(range(first, first + block)))
        if first <= rank < first + block:
            mine_block = g
    for offset in range(block):
        g = dist.new_group(ranks=list(range(offset, world_size, block)))
        if rank % block == offset:
            mine_across = g
    return mine_block, mine_across


def inputs_cp(rank: int, world_size: int, B: int = 16, T: int = 16, heads: int = 8,
              head_dim: int = 64) -> tuple[Any, ...]:
    """54: q, k, v of this rank's T / W tokens; causal, the world as the CP group."""
    s_local = max(1, T // world_size)
    q, k, v = (torch.randn(B, s_local, heads, head_dim, dtype=torch.bfloat16)
               for _ in range(3))
    return q, k, v, None, True, None


def inputs_tp(rank: int, world_size: int, B: int = 16, T: int = 16, heads: int = 8,
              head_dim: int = 64) -> tuple[Any, ...]:
    """55: the hidden states of this CP rank's tokens, this TP rank's QKV and output
    projections (heads / tp of them), tp = min(2, W)."""
    tp = min(2, world_size)
    tp_group, cp_group = _groups(rank, world_size, tp)
    hidden = heads * head_dim
    s_local = max(1, T // (world_size // tp))
    local = heads // tp * head_dim
    x = torch.randn(B, s_local, hidden, dtype=torch.bfloat16)
    w_qkv = torch.randn(3 * local, hidden, dtype=torch.bfloat16)
    w_o = torch.randn(hidden, local, dtype=torch.bfloat16)
    return x, w_qkv, w_o, heads, None, True, tp_group, cp_group


def inputs_pp(rank: int, world_size: int, B: int = 16, T: int = 16, heads: int = 8,
              head_dim: int = 64) -> tuple[Any, ...]:
    """56: the hidden states of this CP rank's tokens and the stage's full-head projections,
    pp = min(2, W) stages of W / pp CP ranks each."""
    pp = min(2, world_size)
    cp = world_size // pp
    cp_group, pp_group = _groups(rank, world_size, cp)
    hidden = heads * head_dim
    x = torch.randn(B, max(1, T // cp), hidden, dtype=torch.bfloat16)
    w_qkv = torch.randn(3 * hidden, hidden, dtype=torch.bfloat16)
    w_o = torch.randn(hidden, hidden, dtype=torch.bfloat16)
    return x, w_qkv, w_o, heads, None, True, cp_group, pp_group


def ring_cp(*args: Any) -> Any:
    return _solution(54)(*args)


def ring_tp(*args: Any) -> Any:
    return _solution(55)(*args)


def ring_pp(*args: Any) -> Any:
    return _solution(56)(*args)
