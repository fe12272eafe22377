"""nccl-tests' algorithm and bus bandwidth (doc/PERFORMANCE.md of NVIDIA/nccl-tests).

algbw = S / t, where S is the size nccl-tests prints: the buffer for all-reduce, broadcast and
reduce; the whole gathered or scattered array (n x shard) for all-gather, reduce-scatter,
scatter and gather; the per-rank input for all-to-all. busbw = algbw x factor(n).
"""

from __future__ import annotations

from collections.abc import Callable

BUSBW_FACTOR: dict[str, Callable[[int], float]] = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "scatter": lambda n: (n - 1) / n,
    "gather": lambda n: (n - 1) / n,
    "send_recv": lambda n: 1.0,
}


def size_bytes(kind: str, bytes_per_rank: float, n: int) -> float:
    """The S of nccl-tests for a call where each rank hands ``bytes_per_rank`` bytes."""
    if kind in ("all_gather", "scatter", "gather"):
        return bytes_per_rank * n
    return bytes_per_rank


def algbw_busbw(kind: str, bytes_per_rank: float, n: int, time_s: float) -> tuple[float, float]:
    """(algbw, busbw) in bytes per second."""
    algbw = size_bytes(kind, bytes_per_rank, n) / time_s
    return algbw, algbw * BUSBW_FACTOR[kind](n)
