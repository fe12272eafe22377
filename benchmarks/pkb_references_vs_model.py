"""PKB's references as measured (validate/pkb_references.py logs) against pkbsim's prediction.

    python benchmarks/pkb_references_vs_model.py LOGS SUMMARY [--topology T] [--markdown]

For every problem the run timed: PKB's wall time (the slowest rank's mean per iteration), the
simulator's nccl_reference prediction for the same task at the run's world size and PKB's
size preset, and error = (predicted - measured) / measured. Problems that did not run, or whose
task cannot take the world size, are listed with the reason. Prints the table, the median
|error| and the largest errors.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from pkbsim.compare.measured import load_measured
from pkbsim.errors import PkbsimError
from pkbsim.sim import Strategy, simulate
from pkbsim.task.loader import instantiate, load_task
from pkbsim.topology import load_topology


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("logs")
    parser.add_argument("summary")
    parser.add_argument("--topology", default="docs/measurements/h200-1gpu.yaml")
    args = parser.parse_args()
    topo = load_topology(args.topology)
    summary = json.loads(Path(args.summary).read_text())
    w = int(summary["world_size"])
    measured = {m.problem: m for m in load_measured(args.logs).items}
    rows, skipped = [], []
    for entry in summary["problems"]:
        stem = entry["problem"]
        if entry["status"] != "ok" or stem not in measured:
            skipped.append((stem, f"{entry['status']}: {entry['error']}"))
            continue
        try:
            inst = instantiate(load_task(stem), w, "pkb")
            pred = simulate(inst, topo, Strategy("nccl_reference")).predicted_us
        except PkbsimError as exc:
            skipped.append((stem, f"not predicted: {exc.one_line()}"))
            continue
        meas = measured[stem].time_us
        rows.append((stem, meas, pred, (pred - meas) / meas))
    print(f"PKB references at W = {w} on {summary['device']}, against nccl_reference on "
          f"{topo.name}\n")
    print("| problem | measured µs | predicted µs | error |\n|---|---:|---:|---:|")
    for stem, meas, pred, err in rows:
        print(f"| {stem} | {meas:.1f} | {pred:.1f} | {err:+.0%} |")
    errs = [abs(r[3]) for r in rows]
    if errs:
        print(f"\n{len(rows)} problems; median |error| {statistics.median(errs):.0%}; "
              f"predicted below measured in {sum(r[3] < 0 for r in rows)} of them")
        worst = sorted(rows, key=lambda r: -abs(r[3]))[:8]
        print("largest errors: " + ", ".join(f"{r[0]} {r[3]:+.0%}" for r in worst))
    print(f"\nnot compared ({len(skipped)}):")
    for stem, why in skipped:
        print(f"- {stem}: {why[:160]}")


if __name__ == "__main__":
    main()
