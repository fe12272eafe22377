"""PKB's references at W = 1 on one H200 (an earlier run, 2026-12-03) against the traced
reference model on the shipped calibrated topology: nothing is fitted here.

    python benchmarks/pkb_references_traced.py [--measured DIR] [--topology FILE]

Measured (docs/measurements/pkb_references_h200_sizes): each problem in a fresh process at PKB's
``--m 1024`` and ``--m 4096`` (``--n 1024``): PKB's mean per call, and from a profile of 10
calls the host's issue time and the GPU's busy time. Model: the simulator's ``nccl_reference``
on the shipped calibrated H200 (docs/measurements/h200-1gpu.yaml, whose host costs and kernel
kinds `pkbsim calibrate` learnt from a later run's odd problem ids: docs/validation.md),
running each problem's traced program (tasks/traces) at the same W and size. Only even problem
ids are scored (the calibration never saw them). Beside it, two older models for comparison:
the single-operator microbenchmark's host costs (docs/measurements/host_classes_h200.json) and
the task files' ops.
"""

from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import dataclass
from pathlib import Path

from pkbsim.errors import PkbsimError
from pkbsim.sim import Strategy, simulate
from pkbsim.task.loader import instantiate, load_task
from pkbsim.topology import load_topology
from pkbsim.trace.store import reference_program

ROOT = Path(__file__).resolve().parent.parent
MEASURED = ROOT / "docs/measurements/pkb_references_h200_sizes"
TOPOLOGY = ROOT / "docs/measurements/h200-1gpu.yaml"
MICRO = ROOT / "docs/measurements/host_classes_h200.json"
EARLIER = ROOT / "docs/measurements/pkb_references_h200_w1/fresh/logs"  # the same, hours before
CLASSES = ("view", "kernel", "library", "collective", "sync")
PARAMS = ("call", *CLASSES)
FIELDS = {"call": "latency.host_call_us", "view": "latency.host_view_us",
          "kernel": "latency.host_launch_us",
          "library": "latency.host_library_us", "collective": "latency.host_collective_us",
          "sync": "latency.host_sync_us"}


@dataclass(frozen=True)
class Measured:
    problem: str
    pid: int
    rows: int
    mean_us: float | None
    host_us: float | None
    gpu_us: float | None


def load_measured(folder: Path) -> list[Measured]:
    out: dict[tuple[str, int], Measured] = {}
    for name in ("summary_odd_first.json", "summary_odd.json", "summary_even.json"):
        path = folder / name
        if not path.is_file():
            continue
        for r in json.loads(path.read_text())["problems"]:
            if r.get("status") != "ok":
                continue
            out[(r["problem"], r["rows"])] = Measured(
                r["problem"], int(r["problem"].split("_")[0]), r["rows"], r.get("mean_us"),
                r.get("host_issue_us"), r.get("gpu_busy_us"))
    return sorted(out.values(), key=lambda m: (m.pid, m.rows))


def instance(m: Measured):
    spec = load_task(m.problem)
    sets = {k: v for k, v in (("M", m.rows), ("N", 1024)) if k in spec.settable()}
    return instantiate(spec, 1, "pkb", sets)


def counts(m: Measured) -> dict[str, float] | None:
    chosen = reference_program(instance(m))
    if chosen is None:
        return None
    totals = chosen.program.totals()
    return {"call": 1.0, **{c: totals.get(c, 0.0) for c in CLASSES}}


def predict(m: Measured, sets: dict[str, float], topology: Path,
            reference: str = "auto") -> float:
    topo = load_topology(str(topology), sets)
    return simulate(instance(m), topo, Strategy("nccl_reference", reference=reference)
                    ).predicted_us


def run_to_run(rows: list[Measured]) -> list[float]:
    """(this run's PKB mean / the earlier fresh run's) - 1, per problem measured in both."""
    out = []
    for m in rows:
        perf = EARLIER / f"problem_{m.problem}" / "reference" / "rank_0_perf.json"
        if m.rows == 1024 and m.mean_us and perf.is_file():
            earlier_us = json.loads(perf.read_text())["wall_time_ms"] * 1e3
            out.append(m.mean_us / earlier_us - 1)
    return out


def summary(errors: list[float]) -> str:
    if not errors:
        return "-"
    within = sum(1 / 1.5 <= 1 + e <= 1.5 for e in errors) / len(errors)
    return (f"{len(errors)} rows, median |error| {statistics.median(abs(e) for e in errors):.0%}"
            f", median error {statistics.median(errors):+.0%}, within 1.5x {within:.0%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--measured", type=Path, default=MEASURED)
    parser.add_argument("--topology", type=Path, default=TOPOLOGY)
    args = parser.parse_args()
    rows = [m for m in load_measured(args.measured)]
    even = [m for m in rows if m.pid % 2 == 0 and m.mean_us]
    shipped = load_topology(str(args.topology)).latency
    shipped_us = {"call": shipped.host_call_us, "view": shipped.host_view_us,
                  "kernel": shipped.host_launch_us, "library": shipped.library_us,
                  "collective": shipped.host_collective_us, "sync": shipped.host_sync_us}
    classes = json.loads(MICRO.read_text())["classes"]
    micro = {c: round(classes["python" if c == "call" else c]["median_us"], 2) for c in PARAMS}
    print(f"Scored: {len(even)} even rows (the calibration's held-out half); "
          f"{args.topology.relative_to(ROOT)} as shipped\n")
    print("| host cost, µs | " + " | ".join(PARAMS) + " |")
    print("|---|" + "---:|" * len(PARAMS))
    print("| shipped calibration | " + " | ".join(f"{shipped_us[c]:.4g}" for c in PARAMS) + " |")
    print("| microbenchmark | " + " | ".join(f"{micro[c]:g}" for c in PARAMS) + " |")
    variants: dict[str, tuple[dict[str, float], str]] = {
        "traced, shipped calibration": ({}, "auto"),
        "traced, microbenchmark host costs": ({FIELDS[c]: micro[c] for c in PARAMS},
                                              "auto"),
        "task files (the model before)": ({}, "task"),
    }
    results: dict[str, dict[tuple[str, int], float]] = {}
    skipped: list[str] = []
    for label, (sets, reference) in variants.items():
        results[label] = {}
        for m in even:
            try:
                results[label][(m.problem, m.rows)] = predict(m, sets, args.topology,
                                                              reference)
            except PkbsimError as exc:
                skipped.append(f"{m.problem} M={m.rows}: {exc.one_line()}")
    best = "traced, shipped calibration"
    print(f"\nHeld-out rows (even ids), predicted against PKB's mean, {best}:\n")
    print("| problem | M | PKB mean µs | predicted µs | error | host issue µs | GPU busy µs "
          "| regime |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    errors: dict[str, list[float]] = {label: [] for label in variants}
    groups: dict[str, list[float]] = {}
    for m in even:
        key = (m.problem, m.rows)
        if key not in results[best] or counts(m) is None:
            continue
        assert m.mean_us is not None
        for label in variants:
            if key in results[label]:
                errors[label].append(results[label][key] / m.mean_us - 1)
        err = results[best][key] / m.mean_us - 1
        regime = ("host-bound" if (m.host_us or 0) >= (m.gpu_us or 0) else "device-bound")
        family = load_task(m.problem).parallelism
        for g in (f"M = {m.rows}", regime, f"family {family}"):
            groups.setdefault(g, []).append(err)
        print(f"| {m.problem} | {m.rows} | {m.mean_us:,.1f} | {results[best][key]:,.1f} | "
              f"{err:+.0%} | {m.host_us or 0:,.1f} | {m.gpu_us or 0:,.1f} | {regime} |")
    print("\nHeld-out error by model:\n")
    for label in variants:
        print(f"- {label}: {summary(errors[label])}")
    print(f"\nBy group ({best}):\n")
    for g in sorted(groups):
        print(f"- {g}: {summary(groups[g])}")
    spread = run_to_run(rows)
    if spread:
        print(f"\nRun to run (M = 1024, fresh processes both times: this run against "
              f"{EARLIER.relative_to(ROOT)}, the same machine hours earlier): "
              f"{len(spread)} problems, median |difference| "
              f"{statistics.median(abs(d) for d in spread):.0%}, from {min(spread):+.0%} to "
              f"{max(spread):+.0%}")
    untraced = sorted({m.problem for m in even if counts(m) is None})
    if untraced or skipped:
        print("\nNot compared: " + "; ".join([f"{p}: no trace" for p in untraced] + skipped))


if __name__ == "__main__":
    main()
