"""PKB problem 83 (NeMo-RL GRPO log-probs) at the blog's sizes, for ``pkbsim trace``.

PKB's input generator fixes the vocabulary at 256; the blog's case study runs 32,000. This file
builds those inputs and calls the reference from a PKB checkout (``PKB_ROOT``, default
``.dev/pkb``), so the reference's own code is traced; nothing of PKB's is copied here.

    PKB_ROOT=.dev/pkb pkbsim trace benchmarks/traces/grpo_blog.py:reference --task 83 \\
        -w 4 --set batch=1 --set seq=16384 --set vocab=32000 --mode fake \\
        --out /tmp/grpo --programs tasks/traces
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any

import torch

REFERENCE = "reference/83_vocab_parallel_log_prob_topk_chunked.py"


def _solution() -> Any:
    path = os.path.join(os.environ.get("PKB_ROOT", ".dev/pkb"), REFERENCE)
    spec = importlib.util.spec_from_file_location("pkb_reference_83", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.solution


def make_inputs(rank: int, world_size: int, batch: int = 1, seq: int = 1024,
                vocab: int = 32000, top_k: int = 10, top_p: float = 0.9) -> tuple[Any, ...]:
    """The reference's arguments at one rank; the chunk size follows PKB's rule (a quarter of
    the sequence, rounded up to a multiple of W)."""
    chunk = min(-(-max(world_size, seq // 4) // world_size) * world_size, seq)
    logits = torch.randn(batch, seq, vocab // world_size, dtype=torch.bfloat16)
    target = torch.randint(0, vocab, (batch, seq))
    return logits, target, None, top_k, top_p, chunk


def reference(*args: Any) -> Any:
    return _solution()(*args)
