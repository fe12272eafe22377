"""What real programs teach the model (pure): host costs per operator class from PKB's
references, and each kernel kind's efficiency and fixed cost from PyTorch's own kernels.

Both fits use one documented half and leave the other for the error report
(benchmarks/pkb_programs_error.py):

- **Host costs** (``pkb_reference`` of the ``pkb.references`` case): fitted on the odd problem
  ids. A row is one problem at one size; its time is the geometric mean of its repetitions
  (PKB's mean per call each). Only host-bound rows count: the host's issue time at least
  ``HOST_BOUND`` of the time per call, so the GPU waits on the host and the time per call is
  what the host spends. Least squares of the log of predicted / measured (over- and
  under-prediction by one factor weigh the same), costs at least 0, of
  ``host_call_us + sum over classes of (operators of the class x its cost)``, the operators
  counted from the problem's traced program at one rank and that size (tasks/traces).
- **Kernel kinds** (``kernel_kind`` of the ``kernels.kinds`` case): per kind, fitted on the
  even positions of each operator's size sweep (both passes). Per kernel
  ``t = a + bytes / (B x e_mem)`` for memory kinds, ``t = a + FLOPs / (P x e_comp)`` for
  ``COMPUTE_KINDS``, by non-negative least squares of the relative error; ``B`` the GPU's
  achievable HBM rate (``gpu.hbm_bandwidth_GBps x gpu.hbm_efficiency``), ``P`` the peak of the
  kernel's type. A graph replay charges each kernel its node launch, so ``fixed_us = a -
  latency.kernel_launch_us`` (at least 0): the simulator adds the eager launch itself.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares, nnls

from pkbsim.errors import PkbsimError
from pkbsim.topology.schema import Topology
from pkbsim.validation.results import Measurement

HOST_BOUND = 0.7  # host issue time / time per call at or above this: a host-bound row
HOST_PARAMS = ("call", "view", "kernel", "library", "collective", "sync")
HOST_FIELDS = {"call": "latency.host_call_us", "view": "latency.host_view_us",
               "kernel": "latency.host_launch_us", "library": "latency.host_library_us",
               "collective": "latency.host_collective_us", "sync": "latency.host_sync_us"}
MIN_ROWS_PER_CLASS = 4  # rows using a class before its cost is fitted
COMPUTE_KINDS = ("gemm", "conv", "attention")
MIN_POINTS_PER_KIND = 3


@dataclass(frozen=True)
class ProgramRow:
    """One problem at one size: PKB's mean per call over its repetitions, the host's issue
    time, and the operators per host class of its traced program (None: no trace)."""

    problem: str
    pid: int
    rows: int
    cols: int
    time_us: float  # geometric mean over repetitions
    reps: tuple[float, ...]
    host_issue_us: float  # median over the repetitions that measured it (0: none did)
    counts: dict[str, float] | None

    @property
    def host_bound(self) -> bool:
        return self.host_issue_us >= HOST_BOUND * self.time_us

    @property
    def fit_half(self) -> bool:
        return self.pid % 2 == 1


@dataclass(frozen=True)
class HostFit:
    costs_us: dict[str, float]  # HOST_PARAMS -> µs
    rows: int  # rows fitted
    rel_rms: float
    skipped: dict[str, str]  # class -> why its cost was not fitted


@dataclass(frozen=True)
class KindFit:
    kind: str
    memory_efficiency: float | None  # None: a compute kind (its memory efficiency is kept)
    compute_efficiency: float | None
    fixed_us: float
    intercept_us: float  # a, before the graph node's launch is taken off
    points: int
    rel_rms: float


def program_rows(ms: Iterable[Measurement]) -> list[ProgramRow]:
    """``pkb_reference`` measurements grouped by problem and size, with their traced counts."""
    groups: dict[tuple[str, int, int], list[Measurement]] = defaultdict(list)
    for m in ms:
        p = m.params
        rows, cols = _count(p.get("rows", 1024)), _count(p.get("cols", 1024))
        if m.op == "pkb_reference" and isinstance(p.get("problem"), str) and m.time_us > 0 \
                and rows and cols:  # a row a results file mangled is left out
            groups[(p["problem"], rows, cols)].append(m)
    out = []
    for (problem, rows, cols), group in sorted(groups.items()):
        head = problem.split("_", 1)[0]
        if not head.isdigit():
            continue
        times = tuple(m.time_us for m in group)
        issues = [_number(m.params.get("host_issue_us")) for m in group
                  if _number(m.params.get("host_issue_us")) > 0]
        issue = statistics.median(issues) if issues else 0.0  # none measured: not host-bound
        out.append(ProgramRow(problem, int(head), rows, cols,
                              math.exp(statistics.fmean(math.log(t) for t in times)), times,
                              issue, traced_counts(problem, rows, cols)))
    return out


def traced_counts(problem: str, rows: int, cols: int) -> dict[str, float] | None:
    """Operators per host class of ``problem``'s traced program at one rank and PKB's
    ``--m rows --n cols`` (one per call for ``call``); None without a trace."""
    from pkbsim.task.loader import instantiate, load_task
    from pkbsim.trace.store import reference_program

    try:
        spec = load_task(problem)
        sets = {k: v for k, v in (("M", rows), ("N", cols)) if k in spec.settable()}
        chosen = reference_program(instantiate(spec, 1, "pkb", sets))
    except PkbsimError:
        return None
    if chosen is None:
        return None
    totals = chosen.program.totals()
    return {"call": 1.0, **{c: totals.get(c, 0.0) for c in HOST_PARAMS[1:]}}


def fit_host_costs(rows: list[ProgramRow], keep: dict[str, float]) -> HostFit:
    """Host costs from the fit half's host-bound rows; a class too few rows use keeps its
    value in ``keep`` (the base's, or a microbenchmark's)."""
    use = [r for r in rows if r.fit_half and r.host_bound and r.counts is not None]
    skipped: dict[str, str] = {}
    free = []
    for c in HOST_PARAMS:
        n = sum(1 for r in use if r.counts and r.counts[c] > 0)
        if n >= MIN_ROWS_PER_CLASS:
            free.append(c)
        else:
            skipped[c] = f"{n} host-bound fit row(s) use it (fewer than {MIN_ROWS_PER_CLASS})"
    if not use or not free:
        raise PkbsimError("no host-bound pkb_reference rows with a traced program on the fit "
                          "half (odd problem ids)")
    counts = np.array([[r.counts[c] for c in free] for r in use if r.counts])
    fixed = np.array([sum(r.counts[c] * keep[c] for c in skipped) for r in use if r.counts])
    times = np.array([r.time_us for r in use])
    start, _ = nnls(counts / times[:, None], 1.0 - fixed / times)

    def log_error(x: np.ndarray) -> np.ndarray:  # over and under by one factor weigh the same
        ratio: np.ndarray = np.maximum(counts @ x + fixed, 1e-9) / times
        return np.asarray(np.log(ratio), dtype=float)

    x = least_squares(log_error, np.maximum(start, 1e-3), bounds=(0.0, np.inf)).x
    costs = {**{c: keep[c] for c in skipped}, **{c: float(v) for c, v in zip(free, x,
                                                                            strict=True)}}
    rel = (counts @ x + fixed) / times - 1.0
    return HostFit(costs, len(use), float(np.sqrt(np.mean(rel**2))), skipped)


def kernel_points(ms: Iterable[Measurement]) -> dict[str, list[tuple[Measurement, bool]]]:
    """``kernel_kind`` measurements of one kind by kind, each with whether it is on the fit
    half (the even positions of its operator's size sweep, in order of size)."""
    sweeps: dict[tuple[str, str, str, str], list[Measurement]] = defaultdict(list)
    for m in ms:
        p = m.params
        kind = str(p.get("kind", ""))
        if m.op != "kernel_kind" or "+" in kind or not kind or m.time_us <= 0 \
                or not _count(p.get("kernels", 1)) or _number(p.get("flops", 0.0)) < 0:
            continue
        family = re.sub(r"\d+", "#", str(p.get("shape", "")))  # one sweep: one shape pattern
        sweeps[(kind, str(p.get("op")), str(p.get("dtype")), family)].append(m)
    out: dict[str, list[tuple[Measurement, bool]]] = defaultdict(list)
    for (kind, *_), sweep in sweeps.items():
        sizes = sorted({m.size_bytes for m in sweep})
        for m in sweep:
            out[kind].append((m, sizes.index(m.size_bytes) % 2 == 0))
    return dict(out)


def kernel_model_us(m: Measurement, fit: KindFit, topo: Topology, memory_eff: float,
                    compute_eff: float) -> float:
    """The model's time per call of one ``kernel_kind`` measurement (graph replay: each
    kernel's node launch included)."""
    kernels = float(_count(m.params.get("kernels", 1)) or 1)
    per = _per_kernel_work(m, topo)
    t = max(per[0] / memory_eff, per[1] / compute_eff)
    return kernels * (fit.fixed_us + topo.latency.kernel_launch_us + t * 1e6)


def fit_kernel_kind(kind: str, points: list[tuple[Measurement, bool]], topo: Topology
                    ) -> KindFit | None:
    """One kind's efficiency and fixed cost from its fit-half points; None with too few."""
    use = [m for m, fit in points if fit]
    if len(use) < MIN_POINTS_PER_KIND:
        return None
    compute = kind in COMPUTE_KINDS
    rows, ys = [], []
    for m in use:
        kernels = float(_count(m.params.get("kernels", 1)) or 1)
        t = m.time_us * 1e-6 / kernels
        work = _per_kernel_work(m, topo)[1 if compute else 0]
        rows.append([1.0 / t, work / t])
        ys.append(1.0)
    x, _ = nnls(np.array(rows), np.array(ys))
    a_s, inv_eff = float(x[0]), float(x[1])
    if inv_eff <= 0:
        return None
    rel = np.array(rows) @ x - 1.0
    eff = 1.0 / inv_eff
    intercept_us = a_s * 1e6
    return KindFit(kind, None if compute else eff, eff if compute else None,
                   max(0.0, intercept_us - topo.latency.kernel_launch_us), intercept_us,
                   len(use), float(np.sqrt(np.mean(rel**2))))


def _per_kernel_work(m: Measurement, topo: Topology) -> tuple[float, float]:
    """(seconds at the full achievable HBM rate, seconds at the full peak) of one kernel."""
    kernels = float(_count(m.params.get("kernels", 1)) or 1)
    peaks = topo.gpu.peak_tflops
    peak = peaks.get("bf16_tensor", peaks["fp32"]) if m.params.get("tensor_core") is True else \
        peaks["fp32"]
    flops = _number(m.params.get("flops", 0.0))
    return (m.size_bytes / kernels / topo.gpu.hbm_Bps, flops / kernels / (peak * 1e12))


def _number(value: object) -> float:
    """A finite numeric param, else 0 (a results file's params are not typed)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return 0.0
    return float(value)


def _count(value: object) -> int:
    """A positive whole-number param, else 0."""
    x = _number(value)
    return int(x) if x >= 1 and x == int(x) and x < 2**53 else 0
