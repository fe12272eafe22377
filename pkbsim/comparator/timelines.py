"""Measured timelines (Kineto traces) beside the simulator's, split into the same terms.

``load_traces`` finds the traces a path names and groups them by problem and variant: PKB's
layout (``logs/problem_<stem>/<backend>/...``: ``pkbsim run``'s ``rank_<r>_trace.json.gz``, PKB's
``--profile`` ``traces/rank_<r>.json``), else the problem given and the variant ``trace``.
``compare_timelines`` splits each rank's calls (pkbsim.timeline.breakdown), takes the rank whose
calls are slowest (PKB's convention), and puts beside its mean the simulator's prediction split
the same way: PKB's reference against ``nccl_reference`` on the reference model the comparison
uses, a candidate against ``custom_best`` (what the best custom kernel would spend, not a model
of the candidate's own program). Pure apart from reading the files.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from pkbsim.errors import PkbsimError
from pkbsim.inputs import loads_json, path_kind, read_bytes
from pkbsim.limits import RANK_FILE_BYTES
from pkbsim.pkb.logs import Measurement, Trial
from pkbsim.task.loader import find_task
from pkbsim.timeline.breakdown import Breakdown, TimelineBreakdown, decompose
from pkbsim.timeline.events import HOST, Timeline, term_key, term_title
from pkbsim.timeline.kineto import TraceFileError, load_kineto, trace_files, with_rank_waits

TRACE_VARIANT = "trace"  # a trace outside PKB's layout
_PROBLEM_DIR = re.compile(r"^problem_(.+)$")
_RANK = re.compile(r"rank[_-]?(\d{1,7})")
SUM_TOLERANCE = 0.05  # the terms' sum against the calls' CUDA-event time (issue 32's target)


@dataclass(frozen=True)
class TermRow:
    term: str
    title: str
    measured_us: float
    share: float  # of the measured call
    model_us: float | None
    diff_us: float | None  # model - measured


@dataclass(frozen=True)
class TimelineComparison:
    variant: str
    files: tuple[str, ...]
    how_calls: str
    calls: int
    ranks: int
    slowest_rank: int
    measured: Breakdown  # the slowest rank's mean call
    call_min_us: float
    call_max_us: float
    event_mean_us: float | None  # the same calls timed by CUDA events, where recorded
    model_label: str
    model: Breakdown | None
    rows: tuple[TermRow, ...]
    timed_us: float | None = None  # the variant's measured time without the profiler (PKB's)

    @property
    def profiler_slowdown(self) -> float | None:
        """The traced calls' time (CUDA events, else windows) over the time measured without
        the profiler: how much the profiler's own host work slowed them."""
        traced = self.event_mean_us or self.measured.total_us
        return traced / self.timed_us if self.timed_us else None

    @property
    def host_without_profiler_us(self) -> float | None:
        """An estimate of ``host_launch`` without the profiler: the time measured without it
        less the GPU's terms and the syncs as traced (kernel and copy durations are the GPU's
        own; the profiler adds host time). None without that time."""
        if not self.timed_us:
            return None
        busy = sum(v for k, v in self.measured.terms.items() if k != HOST)
        return max(self.timed_us - busy, 0.0)

    @property
    def sum_error(self) -> float | None:
        """Sum of the terms over the CUDA-event time, minus 1."""
        if not self.event_mean_us:
            return None
        return self.measured.total_us / self.event_mean_us - 1

    @property
    def within_tolerance(self) -> bool | None:
        err = self.sum_error
        return None if err is None else abs(err) <= SUM_TOLERANCE


def load_traces(path: Path, problem: str | None = None, call_marker: str | None = None
                ) -> dict[tuple[str | None, str], list[TimelineBreakdown]]:
    """The traces under ``path`` by (task key or None, variant), each group's ranks sorted,
    their collectives' waits for the last rank set, and split into terms."""
    groups: dict[tuple[str | None, str], list[Timeline]] = {}
    for file in trace_files(path):
        key = _key_of(file, problem)
        tl = load_kineto(file, call_marker)
        events = _event_times(file, tl.rank)
        if events:
            tl = replace(tl, event_call_us=events)
        groups.setdefault(key, []).append(tl)
    out = {}
    for key, tls in groups.items():
        tls.sort(key=lambda t: (t.rank, t.source))
        ranks = [t.rank for t in tls]
        if len(set(ranks)) != len(ranks):
            raise TraceFileError(f"two traces of rank {_first_dup(ranks)} for "
                                 f"{key[0] or 'the problem'} / {key[1]} (keep one run per "
                                 "folder)", file=str(path))
        out[key] = [decompose(t) for t in with_rank_waits(tls)]
    return out


def _first_dup(values: list[int]) -> int:
    seen: set[int] = set()
    for v in values:
        if v in seen:
            return v
        seen.add(v)
    return values[0]


def _key_of(file: Path, problem: str | None) -> tuple[str | None, str]:
    parts = file.parts
    for i, part in enumerate(parts[:-1]):
        m = _PROBLEM_DIR.match(part)
        if m and i + 1 < len(parts) - 1:
            try:
                key = find_task(m.group(1)).stem
            except PkbsimError:
                continue
            return key, parts[i + 1]
    return problem, TRACE_VARIANT


def _event_times(trace: Path, rank: int) -> tuple[float, ...] | None:
    """``call_event_us`` of the ``rank_<r>_profile.json`` ``pkbsim run`` wrote beside the
    trace, if any (a malformed one is ignored: the trace stands without it)."""
    beside = trace.parent / f"rank_{rank}_profile.json"
    if path_kind(beside, error=TraceFileError) != "file":
        return None
    try:
        data = loads_json(read_bytes(beside, limit=RANK_FILE_BYTES, error=TraceFileError),
                          file=str(beside), error=TraceFileError)
    except TraceFileError:
        return None
    values = data.get("call_event_us") if isinstance(data, dict) else None
    if not isinstance(values, list) or not values or not all(
            isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
            and v > 0 for v in values):
        return None
    return tuple(float(v) for v in values)


def measurement_of(problem: str, variant: str, parts: Sequence[TimelineBreakdown]
                   ) -> Measurement:
    """The measured time the traces give (when no PKB log times the variant): per rank, the
    calls' CUDA-event mean where recorded, else the mean of the calls' windows."""
    per_rank = []
    for part in sorted(parts, key=lambda p: p.timeline.rank):
        per_rank.append(part.event_mean_us or part.mean.total_us)
    first = parts[0].timeline.source
    source = first if len(parts) == 1 else str(Path(first).parent)
    return Measurement(problem, variant, (Trial(tuple(per_rank), source),))


def compare_timelines(variant: str, parts: Sequence[TimelineBreakdown],
                      model: Breakdown | None, model_label: str,
                      timed_us: float | None = None) -> TimelineComparison:
    if not any(p.calls for p in parts):
        raise TraceFileError("no call found in the trace", file=parts[0].timeline.source)
    slow: TimelineBreakdown = max(parts, key=lambda p: (p.mean.total_us, -p.timeline.rank))
    m = slow.mean
    terms = sorted(set(m.terms) | set(model.terms if model else ()), key=term_key)
    rows = []
    for term in terms:
        mu = m.terms.get(term, 0.0)
        mo = model.terms.get(term, 0.0) if model is not None else None
        rows.append(TermRow(term, term_title(term), mu, m.share(term), mo,
                            None if mo is None else mo - mu))
    calls = slow.call_us
    return TimelineComparison(
        variant, tuple(p.timeline.source for p in parts), slow.timeline.how_calls, len(calls),
        len(parts), slow.timeline.rank, m, min(calls), max(calls), slow.event_mean_us,
        model_label, model, tuple(rows), timed_us)
