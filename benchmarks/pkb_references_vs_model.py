"""PKB's references as measured (validate/pkb_references.py logs) against pkbsim's prediction.

    python benchmarks/pkb_references_vs_model.py LOGS SUMMARY [SUMMARY ...] [--topology T]
        [--set latency.host_launch_us=24]   (a what-if: any topology field, as pkbsim's --set)
        [--also LABEL=LOGS]   (another run of the same references: PKB's mean there / here)

For every problem the run timed: PKB's wall time (the slowest rank's mean per iteration) and the
timed iterations' median, the simulator's nccl_reference prediction for the same task at the
run's world size and PKB's size preset, and error = (predicted - PKB's mean) / PKB's mean.
Where the run profiled each call (``--profile-iters``), the measured side that binds (host issue
time against GPU busy time) is set beside the model's host and GPU time, and each problem gets
one cause (docs/metrics.md §11.4):

- ``no GPU work``: the call launched nothing on the GPU (at W = 1 NCCL skips an in-place
  collective; some references return early); PKB times the host alone: its own loop's floor or
  the host's issue time, whichever is larger;
- ``host dispatch``: host-bound (host issue >= GPU busy); the error is the model's host time
  against the host's measured issue time;
- ``device time``: GPU-bound; the error is the model's GPU time against the measured busy time;
- ``unprofiled``: no profile in the summary.

A problem whose mean is over 1.25 x its median is also marked ``slow iterations``. Later
SUMMARY files replace earlier rows of the same problem. Problems that did not run, or whose task
cannot take the world size, are listed with the reason.
"""

from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pkbsim.errors import PkbsimError
from pkbsim.pkb.logs import load_measured
from pkbsim.sim import SimResult, Strategy, simulate
from pkbsim.task.loader import instantiate, load_task
from pkbsim.topology import load_topology

SLOW_ITERATIONS = 1.25  # mean / median above this: outliers weigh on PKB's mean


@dataclass(frozen=True)
class Row:
    problem: str
    mean_us: float
    median_us: float | None
    predicted_us: float
    model_host_us: float
    model_gpu_us: float
    model_kernels: int
    profile: dict[str, Any]

    @property
    def error(self) -> float:
        return (self.predicted_us - self.mean_us) / self.mean_us

    @property
    def cause(self) -> str:
        p = self.profile
        if "gpu_ops_per_call" not in p:
            return "unprofiled"
        if p["gpu_ops_per_call"] == 0:
            return "no GPU work"
        return "host dispatch" if p["host_issue_us"] >= p["gpu_busy_us"] else "device time"

    @property
    def slow_iterations(self) -> bool:
        return self.median_us is not None and self.mean_us > SLOW_ITERATIONS * self.median_us


def model_side(res: SimResult) -> tuple[float, float, int]:
    """The prediction's host time, GPU time and kernels (stream nodes) per iteration."""
    last = res.iterations - 1
    kernels = sum(1 for n in res.nodes if n.iteration == last and n.rank == res.slowest_rank
                  and n.track != "host" and n.name != "iteration_end")
    return (sum(o.host_us for o in res.ops), sum(o.gpu_us for o in res.ops), kernels)


def merged_summary(paths: list[str]) -> tuple[int, str, dict[str, dict[str, Any]]]:
    rows: dict[str, dict[str, Any]] = {}
    world, device = None, ""
    for path in paths:
        data = json.loads(Path(path).read_text())
        if world is not None and int(data["world_size"]) != world:
            raise SystemExit(f"{path}: world_size {data['world_size']} differs from {world}")
        world, device = int(data["world_size"]), str(data["device"])
        rows.update({r["problem"]: r for r in data["problems"]})
    assert world is not None
    return world, device, dict(sorted(rows.items(), key=lambda kv: int(kv[0].split("_")[0])))


def other_run(label: str, logs: str, here: dict[str, float]) -> str:
    """PKB's mean in another run of the same references, as a ratio to this run's."""
    there = {m.problem: m.time_us for m in load_measured(logs).items}
    ratios = sorted((there[p] / here[p], p) for p in there if p in here)
    if not ratios:
        return f"{label}: no problem in common"
    mid = statistics.median(r for r, _ in ratios)
    return (f"{label}: {len(ratios)} problems, PKB's mean there / here: median {mid:.2f}, "
            f"from {ratios[0][0]:.2f} ({ratios[0][1]}) to {ratios[-1][0]:.2f} ({ratios[-1][1]})")


def _f(x: float | None, digits: int = 1) -> str:
    return "–" if x is None else f"{x:,.{digits}f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("logs")
    parser.add_argument("summary", nargs="+")
    parser.add_argument("--topology", default="docs/measurements/h200-1gpu.yaml")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE")
    parser.add_argument("--also", action="append", default=[], metavar="LABEL=LOGS")
    args = parser.parse_args()
    overrides = {k: float(v) for k, v in (item.split("=", 1) for item in args.set)}
    topo = load_topology(args.topology, overrides or None)
    w, device, entries = merged_summary(args.summary)
    measured = {m.problem: m for m in load_measured(args.logs).items}
    rows, skipped = [], []
    for stem, entry in entries.items():
        if entry["status"] != "ok" or stem not in measured:
            skipped.append((stem, f"{entry['status']}: {entry['error']}"))
            continue
        try:
            res = simulate(instantiate(load_task(stem), w, "pkb"), topo,
                           Strategy("nccl_reference", reference="task"))
        except PkbsimError as exc:
            skipped.append((stem, f"not predicted: {exc.one_line()}"))
            continue
        host, gpu, kernels = model_side(res)
        profile = {k: v for k, v in entry.items() if k not in ("problem", "status", "error")}
        rows.append(Row(stem, measured[stem].time_us, entry.get("median_us"), res.predicted_us,
                        host, gpu, kernels, profile))
    what_if = "".join(f", {k} = {v:g}" for k, v in overrides.items())
    print(f"PKB references at W = {w} on {device}, against nccl_reference on {topo.name}"
          f"{what_if}\n")
    print("| problem | PKB mean µs | median µs | predicted µs | error | host issue µs "
          "(model) | GPU busy µs (model) | GPU ops (model kernels) | cause |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        p = r.profile
        cause = r.cause + (", slow iterations" if r.slow_iterations else "")
        print(f"| {r.problem} | {_f(r.mean_us)} | {_f(r.median_us)} | {_f(r.predicted_us)} | "
              f"{r.error:+.0%} | {_f(p.get('host_issue_us'))} ({_f(r.model_host_us)}) | "
              f"{_f(p.get('gpu_busy_us'))} ({_f(r.model_gpu_us)}) | "
              f"{_f(p.get('gpu_ops_per_call'), 0)} ({r.model_kernels}) | {cause} |")
    if rows:
        errs = [abs(r.error) for r in rows]
        print(f"\n{len(rows)} problems; median |error| {statistics.median(errs):.0%}; "
              f"predicted below measured in {sum(r.error < 0 for r in rows)} of them; "
              f"{sum(r.slow_iterations for r in rows)} with slow iterations "
              f"(mean > {SLOW_ITERATIONS} x median)\n")
        print("| cause | problems | median error | median measured / model |\n|---|---:|---:|---|")
        for cause in ("host dispatch", "device time", "no GPU work", "unprofiled"):
            group = [r for r in rows if r.cause == cause]
            if not group:
                continue
            if cause == "host dispatch":
                ratio = "host " + _f(statistics.median(
                    r.profile["host_issue_us"] / r.model_host_us for r in group), 2) + \
                    "x; GPU ops / model kernels " + _f(statistics.median(
                        r.profile["gpu_ops_per_call"] / r.model_kernels for r in group), 2) + \
                    "x; host µs per GPU op " + _f(statistics.median(
                        r.profile["host_issue_us"] / r.profile["gpu_ops_per_call"]
                        for r in group))
            elif cause == "device time":
                ratio = "GPU busy " + _f(statistics.median(
                    r.profile["gpu_busy_us"] / r.model_gpu_us for r in group), 2) + "x"
            elif cause == "no GPU work":
                ratio = "measured median " + _f(statistics.median(
                    r.median_us for r in group if r.median_us is not None)) + " µs, host " + \
                    _f(statistics.median(r.profile["host_issue_us"] for r in group)) + " µs"
            else:
                ratio = "–"
            print(f"| {cause} | {len(group)} | "
                  f"{statistics.median(r.error for r in group):+.0%} | {ratio} |")
        worst = sorted(rows, key=lambda r: -abs(r.error))[:10]
        print("\nlargest errors: " + ", ".join(f"{r.problem} {r.error:+.0%} ({r.cause})"
                                               for r in worst))
    for item in args.also:
        label, logs = item.split("=", 1)
        print("\n" + other_run(label, logs, {r.problem: r.mean_us for r in rows}))
    if skipped:
        print(f"\nnot compared ({len(skipped)}):")
        for stem, why in skipped:
            print(f"- {stem}: {why[:200]}")


if __name__ == "__main__":
    main()
