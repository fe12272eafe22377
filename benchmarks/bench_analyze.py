"""Speed of the analyzer. Prints figures; asserts nothing (targets live in docs/measurements.md).

1. ``pkbsim analyze --task grpo`` as a new process: median wall time over N runs.
2. Every shipped task on every shipped topology, in one process (W = the task's default, or the
   topology's GPU count when that is smaller): total wall time.
3. ``pkbsim analyze --all`` on every shipped topology in one process (tasks loaded once, one
   overview per topology, each rendered as a table): total wall time; and ``pkbsim analyze
   --all`` as a new process on the default topology, median of N runs.

Run: python benchmarks/bench_analyze.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time


def cli_runs(runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "pkbsim", "analyze", "--task", "grpo"],
                       check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return times


def all_pairs() -> tuple[float, int, int]:
    from pkbsim.errors import InfeasibleError
    from pkbsim.roofline import roofline
    from pkbsim.task.loader import instantiate, list_tasks, load_task
    from pkbsim.topology import list_topologies, load_topology

    start = time.perf_counter()
    topologies = [load_topology(name) for name in list_topologies()]
    specs = [load_task(str(path)) for path in list_tasks()]
    done = skipped = 0
    for spec in specs:
        for topo in topologies:
            w = min(spec.default_world_size, topo.total_gpus)
            try:
                roofline(instantiate(spec, w), topo)
                done += 1
            except InfeasibleError:
                skipped += 1
    return time.perf_counter() - start, done, skipped


def all_overviews() -> tuple[float, int, int]:
    from pkbsim.overview import load_specs, overview
    from pkbsim.report.overview_report import render_table
    from pkbsim.topology import list_topologies, load_topology

    start = time.perf_counter()
    specs = load_specs()
    rows = analysed = 0
    for name in list_topologies():
        topo = load_topology(name)
        ov = overview(topo, min(8, topo.total_gpus), "pkb", specs=specs)
        render_table(ov)
        rows += len(ov.rows)
        analysed += len(ov.analysed)
    return time.perf_counter() - start, rows, analysed


def cli_all_runs(runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "pkbsim", "analyze", "--all"], check=True,
                       stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    print(f"machine: {platform.node()} {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, Python {platform.python_version()}")
    times = cli_runs(args.runs)
    print(f"pkbsim analyze --task grpo (new process, {args.runs} runs): "
          f"median {statistics.median(times):.3f} s, min {min(times):.3f} s, "
          f"max {max(times):.3f} s   [target: median < 0.8 s]")
    total, done, skipped = all_pairs()
    print(f"all tasks x all topologies in one process: {total:.3f} s for {done} analyses "
          f"({skipped} infeasible pairs skipped)   [target: < 1 s]")
    total, rows, analysed = all_overviews()
    print(f"analyze --all on every shipped topology, one process: {total:.3f} s for {rows} rows "
          f"({analysed} analysed)   [target: < 2 s]")
    times = cli_all_runs(max(3, args.runs // 3))
    print(f"pkbsim analyze --all (new process, {len(times)} runs): median "
          f"{statistics.median(times):.3f} s, min {min(times):.3f} s, max {max(times):.3f} s")


if __name__ == "__main__":
    main()
