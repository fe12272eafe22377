"""Where a call's time went: its window split, instant by instant, into named terms.

At each instant of the window (docs/metrics.md §11.6):

1. some kernel or local copy runs: the instant goes to ``kernel:<kind>``, shared equally by
   the kinds running then (communication running at the same time is hidden: it counts in
   ``overlapped_comm_us``, not in the sum);
2. else communication runs (an NCCL kernel, a peer copy): ``wait_ranks`` while every
   collective running is still waiting for the last rank to reach it, else ``communication``;
3. else the GPU is idle: ``sync`` while the host is inside a blocking call
   (``cudaStreamSynchronize``, a blocking ``cudaMemcpy``, ...), else ``host_launch`` (the GPU
   waiting for the host to issue work), itself split by the outermost host operator running
   then (``python`` between operators).

The terms partition the window, so they sum to the call's time; what checks them is the call's
time measured apart (CUDA events around each call). Pure.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from pkbsim.timeline.events import (
    COMM,
    HOST,
    KERNEL,
    SYNC,
    WAIT,
    GpuOp,
    HostSpan,
    Timeline,
    term_key,
)

BETWEEN_OPS = "python"  # host time between host operators
T = TypeVar("T")


@dataclass(frozen=True)
class Breakdown:
    total_us: float  # the window: the sum of the terms
    terms: dict[str, float]  # µs per term, sorted by term_key
    host_ops: dict[str, float] = field(default_factory=dict)  # host_launch by host operator
    comm_us: float = 0.0  # all communication time, hidden or not
    overlapped_comm_us: float = 0.0  # communication hidden behind kernels

    def share(self, term: str) -> float:
        return self.terms.get(term, 0.0) / self.total_us if self.total_us > 0 else 0.0


WARMUP_CALLS = 1  # left out of the steady state when there are at least STEADY_FROM calls
STEADY_FROM = 3


def steady(values: Sequence[T]) -> Sequence[T]:
    """The steady-state calls: all but the first when there are at least STEADY_FROM (the
    profiler's start-up shows in the first profiled call)."""
    return values[WARMUP_CALLS:] if len(values) >= STEADY_FROM else values


@dataclass(frozen=True)
class TimelineBreakdown:
    timeline: Timeline
    calls: tuple[Breakdown, ...]  # every call
    mean: Breakdown  # each term's mean over the steady calls (summing to their mean time)

    @property
    def call_us(self) -> tuple[float, ...]:
        """The steady calls' times."""
        return tuple(c.total_us for c in steady(self.calls))

    @property
    def event_mean_us(self) -> float | None:
        """The steady calls' mean by CUDA events, where they were recorded."""
        ev = self.timeline.event_call_us
        return statistics.fmean(steady(ev)) if ev else None

    @property
    def sum_error(self) -> float | None:
        """(sum of the mean terms) / (the calls' mean time by CUDA events) - 1, where events
        were recorded."""
        ev = self.event_mean_us
        return self.mean.total_us / ev - 1 if ev else None


@dataclass(frozen=True)
class _Index:
    """Starts of a timeline's GPU operations, host spans and syncs, for bisection."""

    gpu: list[float]
    longest_us: float
    host: list[float]
    syncs: list[float]


def _index(gpu: Sequence[GpuOp], host: Sequence[HostSpan], syncs: Sequence[HostSpan]) -> _Index:
    return _Index([o.start_us for o in gpu],
                  max((o.end_us - o.start_us for o in gpu), default=0.0),
                  [h.start_us for h in host], [s.start_us for s in syncs])


def split_window(start: float, end: float, gpu: Sequence[GpuOp], host: Sequence[HostSpan],
                 syncs: Sequence[HostSpan], index: _Index | None = None) -> Breakdown:
    """The terms of the window ``[start, end]``; ``gpu`` sorted by start, ``host`` the calling
    thread's outermost operators and ``syncs`` its blocking calls, each sorted by start
    (``index``: their starts, computed once per timeline)."""
    index = index or _index(gpu, host, syncs)
    starts, max_op_us = index.gpu, index.longest_us
    lo = bisect.bisect_left(starts, start - max_op_us)
    hi = bisect.bisect_left(starts, end)
    edges: list[tuple[float, int, str]] = []  # (time, +1/-1, what)
    comm_us = 0.0
    for o in gpu[lo:hi]:
        a, b = max(o.start_us, start), min(o.end_us, end)
        if b <= a:
            continue
        if o.comm:
            comm_us += b - a
            w = min(max(o.start_us + o.wait_us, a), b)
            if w > a:
                edges += [(a, 1, "\0wait"), (w, -1, "\0wait")]
            if b > w:
                edges += [(w, 1, "\0comm"), (b, -1, "\0comm")]
        else:
            edges += [(a, 1, o.kind), (b, -1, o.kind)]
    edges.sort(key=lambda e: (e[0], e[1]))
    terms: dict[str, float] = defaultdict(float)
    active: dict[str, int] = defaultdict(int)
    idle: list[tuple[float, float]] = []
    overlapped = 0.0
    t = start
    i = 0
    while t < end:
        while i < len(edges) and edges[i][0] <= t:
            active[edges[i][2]] += edges[i][1]
            i += 1
        nxt = edges[i][0] if i < len(edges) else end
        nxt = min(nxt, end)
        dt = nxt - t
        if dt > 0:
            kinds = [k for k, n in active.items() if n > 0 and not k.startswith("\0")]
            comm = active["\0comm"] > 0
            wait = active["\0wait"] > 0
            if kinds:
                for k in kinds:
                    terms[KERNEL + k] += dt / len(kinds)
                if comm or wait:
                    overlapped += dt
            elif comm:
                terms[COMM] += dt
            elif wait:
                terms[WAIT] += dt
            elif idle and idle[-1][1] == t:
                idle[-1] = (idle[-1][0], nxt)
            else:
                idle.append((t, nxt))
        t = nxt
    host_ops: dict[str, float] = defaultdict(float)
    for a, b in idle:
        for x0, x1, blocked in _by_syncs(a, b, syncs, index.syncs):
            if blocked:
                terms[SYNC] += x1 - x0
            else:
                terms[HOST] += x1 - x0
                _host_split(x0, x1, host, index.host, host_ops)
    total = end - start
    return Breakdown(total, dict(sorted(terms.items(), key=lambda kv: term_key(kv[0]))),
                     dict(sorted(host_ops.items(), key=lambda kv: -kv[1])), comm_us, overlapped)


def _by_syncs(a: float, b: float, syncs: Sequence[HostSpan], starts: Sequence[float]
              ) -> list[tuple[float, float, bool]]:
    """``[a, b]`` cut where the host is inside a blocking call (True) and where not."""
    out: list[tuple[float, float, bool]] = []
    k = max(bisect.bisect_right(starts, a) - 1, 0)
    t = a
    while k < len(syncs) and syncs[k].start_us < b:
        lo, hi = max(syncs[k].start_us, t), min(syncs[k].end_us, b)
        if hi > lo:
            if lo > t:
                out.append((t, lo, False))
            out.append((lo, hi, True))
            t = hi
        k += 1
    if b > t:
        out.append((t, b, False))
    return out


def _host_split(a: float, b: float, host: Sequence[HostSpan], starts: Sequence[float],
                out: dict[str, float]) -> None:
    """``[a, b]`` by the host operator running (the first to start where spans overlap)."""
    k = max(bisect.bisect_right(starts, a) - 1, 0)
    cursor = a
    covered = 0.0
    while k < len(host) and host[k].start_us < b:
        h = host[k]
        lo, hi = max(h.start_us, cursor), min(h.end_us, b)
        if hi > lo:
            out[h.name] += hi - lo
            covered += hi - lo
            cursor = hi
        k += 1
    if b - a - covered > 0:
        out[BETWEEN_OPS] += b - a - covered


def decompose(timeline: Timeline) -> TimelineBreakdown:
    """Every call of a timeline split into terms, and their mean."""
    index = _index(timeline.gpu, timeline.host, timeline.syncs)
    calls = tuple(split_window(c.start_us, c.end_us, timeline.gpu, timeline.host,
                               timeline.syncs, index) for c in timeline.calls)
    return TimelineBreakdown(timeline, calls, mean_of(steady(calls)))


def mean_of(parts: Sequence[Breakdown]) -> Breakdown:
    """Each term's mean (absent terms count 0), so the means sum to the mean total."""
    n = len(parts)
    if n == 0:
        return Breakdown(0.0, {})
    terms: dict[str, float] = defaultdict(float)
    host: dict[str, float] = defaultdict(float)
    for p in parts:
        for k, v in p.terms.items():
            terms[k] += v / n
        for k, v in p.host_ops.items():
            host[k] += v / n
    return Breakdown(math.fsum(p.total_us for p in parts) / n,
                     dict(sorted(terms.items(), key=lambda kv: term_key(kv[0]))),
                     dict(sorted(host.items(), key=lambda kv: -kv[1])),
                     math.fsum(p.comm_us for p in parts) / n,
                     math.fsum(p.overlapped_comm_us for p in parts) / n)
