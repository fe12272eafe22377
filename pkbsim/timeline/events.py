"""A measured or modelled timeline: GPU operations, host spans and the calls they belong to.

Times are µs on one clock (a trace's own). Pure: no torch.
"""

from __future__ import annotations

from dataclasses import dataclass

# the terms a call's time is split into (docs/compare.md, "Where the measured time went"),
# in the order reports list them; ``kernel:<kind>`` stands for one term per kernel kind
HOST = "host_launch"  # the GPU idle while the host issues work (launch-bound)
SYNC = "sync"  # the GPU idle while the host is blocked on it (device-to-host synchronisation)
COMM = "communication"  # communication kernels and copies not overlapped with compute
WAIT = "wait_ranks"  # a collective waiting for the last rank to reach it
KERNEL = "kernel:"  # prefix: GPU time of kernels (and local copies) by kind
TERM_ORDER = (HOST, SYNC, COMM, WAIT)

TERM_TITLES = {
    HOST: "GPU idle, waiting for the host (launch-bound)",
    SYNC: "device-to-host syncs (GPU idle while the host is blocked)",
    COMM: "communication not overlapped with compute",
    WAIT: "waiting on other ranks",
}


def term_title(term: str) -> str:
    if term.startswith(KERNEL):
        return f"{term[len(KERNEL):]} kernels"
    return TERM_TITLES.get(term, term)


def term_key(term: str) -> tuple[int, str]:
    """Sort key: host, sync, communication, waits, then kernel kinds by name."""
    if term in TERM_ORDER:
        return (TERM_ORDER.index(term), term)
    return (len(TERM_ORDER), term)


@dataclass(frozen=True)
class GpuOp:
    start_us: float
    end_us: float
    name: str
    kind: str  # the kernel kind (pkbsim.trace.classes), or "communication"
    comm: bool  # an NCCL kernel, a peer copy: communication
    call: int  # index of the call that launched it, -1 when none did
    stream: int = 0
    wait_us: float = 0.0  # of a collective: the time spent waiting for the last rank


@dataclass(frozen=True)
class HostSpan:
    start_us: float
    end_us: float
    name: str  # the outermost host operator (``aten::mm``, ``c10d::allreduce_``) or a sync


@dataclass(frozen=True)
class Call:
    """One call of the program: its host span and its window on the GPU's clock."""

    index: int
    host_start_us: float
    host_end_us: float
    start_us: float  # the window the call's time is split over
    end_us: float

    @property
    def duration_us(self) -> float:
        return self.end_us - self.start_us


@dataclass(frozen=True)
class Timeline:
    source: str  # the file, or "model"
    rank: int
    world_size: int
    calls: tuple[Call, ...]
    gpu: tuple[GpuOp, ...]  # sorted by start
    host: tuple[HostSpan, ...]  # outermost host operators of the calling thread, sorted
    syncs: tuple[HostSpan, ...]  # the host blocked on the GPU, sorted
    how_calls: str  # how the calls were found (ProfilerStep annotations, solution() ...)
    event_call_us: tuple[float, ...] | None = None  # CUDA-event times of the calls, if known
