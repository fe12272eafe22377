"""The model's error against a validation run (``pkbsim validate --report DIR``).

:func:`build_report` pairs every measurement with the simulator's prediction for the same
operation on the uncalibrated (base) and the calibrated topology; error = (predicted -
measured) / measured. Summaries give the median absolute error per case, per op and per
regime (latency: under 64 KiB or no payload; bandwidth: 1 MiB and over; middle between).
pkbsim.report.validation_report renders it.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from pkbsim.topology.schema import Topology
from pkbsim.validation.predict import Prediction, explain
from pkbsim.validation.results import Measurement, Results

REGIMES = {"latency": "under 64 KiB, or no payload", "middle": "64 KiB to 1 MiB",
           "bandwidth": "1 MiB and over"}
TOPOLOGIES = ("base", "calibrated")


@dataclass(frozen=True)
class Row:
    """One measurement and its predictions (None where the model has none)."""

    case: str
    m: Measurement
    base: Prediction | None
    calibrated: Prediction | None

    def predicted_us(self, which: str) -> float | None:
        p: Prediction | None = getattr(self, which)
        return None if p is None else p.predicted_us

    def error(self, which: str) -> float | None:
        """(predicted - measured) / measured."""
        t = self.predicted_us(which)
        return None if t is None else (t - self.m.time_us) / self.m.time_us


@dataclass(frozen=True)
class Summary:
    key: str  # a case key, an op, a regime, or "all"
    n: int  # measurements with a prediction on either topology
    n_by: dict[str, int] = field(hash=False)  # per topology: those with a prediction there
    median_abs_error: dict[str, float | None] = field(hash=False)  # per topology


@dataclass(frozen=True)
class NotModelled:
    op: str
    reason: str
    count: int
    on: tuple[str, ...]  # the topologies without a prediction ("base", "calibrated")


@dataclass(frozen=True)
class ValidationReport:
    results: Results
    results_sha256: str
    base: Topology
    calibrated: Topology
    rows: tuple[Row, ...]
    by_case: tuple[Summary, ...]
    by_op: tuple[Summary, ...]
    by_regime: tuple[Summary, ...]
    overall: Summary
    not_modelled: tuple[NotModelled, ...]


def build_report(results: Results, base: Topology, calibrated: Topology,
                 results_sha256: str = "") -> ValidationReport:
    """Every measurement of ``results`` against the simulator on both topologies."""
    rows: list[Row] = []
    missing: dict[tuple[str, str, tuple[str, ...]], int] = {}
    for case, m in results.measurements():
        found = {w: explain(m, t)
                 for w, t in zip(TOPOLOGIES, (base, calibrated), strict=True)}
        without = tuple(w for w in TOPOLOGIES if isinstance(found[w], str))
        if without:
            reason = str(found[without[0]])
            key = (m.op, reason, without)
            missing[key] = missing.get(key, 0) + 1
        if len(without) < len(TOPOLOGIES):
            rows.append(Row(case.key, m, *(_pred(found[w]) for w in TOPOLOGIES)))
    return ValidationReport(
        results, results_sha256, base, calibrated, tuple(rows),
        by_case=_summaries(rows, lambda r: r.case),
        by_op=_summaries(rows, lambda r: r.m.op),
        by_regime=_summaries(rows, lambda r: r.m.regime, REGIMES),
        overall=_summary("all", rows),
        not_modelled=tuple(NotModelled(op, why, n, on)
                           for (op, why, on), n in missing.items()))


def _pred(found: Prediction | str) -> Prediction | None:
    return found if isinstance(found, Prediction) else None


def _summary(key: str, rows: list[Row]) -> Summary:
    n_by: dict[str, int] = {}
    med: dict[str, float | None] = {}
    for which in TOPOLOGIES:
        errors = [abs(e) for r in rows if (e := r.error(which)) is not None]
        n_by[which] = len(errors)
        med[which] = statistics.median(errors) if errors else None
    return Summary(key, len(rows), n_by, med)


def _summaries(rows: list[Row], key: Callable[[Row], str], order: Iterable[str] = ()
               ) -> tuple[Summary, ...]:
    groups: dict[str, list[Row]] = {k: [] for k in order}
    for r in rows:
        groups.setdefault(key(r), []).append(r)
    return tuple(_summary(k, g) for k, g in groups.items())
