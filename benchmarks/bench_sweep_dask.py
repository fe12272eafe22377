"""Wall time of ``pkbsim sweep --executor dask`` against the local executor (issue 20).

A 2,000-point simulator sweep of all-reduce (two topologies, two world sizes, 25 NVLink
bandwidths, 20 sizes) on 2 worker processes: the local process pool against a Dask LocalCluster
of 2 workers (1 thread each) that the command starts and closes. Target: Dask within 15% of
local. The grid runs twice: with ``--metric nccl_reference`` (cheap points, about 5 ms each)
and, with ``--costly``, ``--metric nccl_reference,custom_best`` (about 140 ms each). A 2-point
sweep gives each executor's fixed cost (start-up, imports, shutdown), so that the overhead per
point can be told from it.

Each figure is one ``python -m pkbsim sweep ...`` child process (imports included), output
discarded; ``--repeat N`` keeps the fastest of N, the executors taking turns (the costly grid
runs once). ``--phases`` splits the Dask executor's fixed cost instead: in a new interpreter, as
the command does it, the fork server started, pkbsim's sweep imported, dask.distributed
imported, the LocalCluster's 2 workers ready, a 2-point sweep, the close (medians of N).
Run: ``python benchmarks/bench_sweep_dask.py [--repeat N] [--costly | --phases]`` (needs
``pip install 'pkbsim[cluster]'``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import shlex
import subprocess
import sys
import time

GRID = ["--collective", "all_reduce", "--vary", "topology=dgx-h100,hgx-b200",
        "--vary", "world_size=4,8", "--vary", "scale_up.bandwidth_GBps=100:1300:+50",
        "--sizes", "1KiB:512MiB:x2", "--format", "csv"]
CHEAP = [*GRID, "--metric", "nccl_reference"]
COSTLY = [*GRID, "--metric", "nccl_reference,custom_best"]
POINTS = 2 * 2 * 25 * 20
TINY = ["--collective", "all_reduce", "--sizes", "1KiB,2KiB", "--metric", "nccl_reference",
        "--format", "csv"]
EXECUTORS = (["--executor", "local"], ["--executor", "dask"])
JOBS = 2
TARGET = 1.15


def command(args: list[str], executor: list[str]) -> list[str]:
    return [sys.executable, "-m", "pkbsim", "sweep", *args, *executor, "--jobs", str(JOBS)]


def walls(args: list[str], repeat: int) -> list[float]:
    """The fastest of ``repeat`` runs of each executor, in EXECUTORS' order."""
    best = [float("inf")] * len(EXECUTORS)
    for _ in range(repeat):
        for k, executor in enumerate(EXECUTORS):
            start = time.perf_counter()
            subprocess.run(command(args, executor), check=True, stdout=subprocess.DEVNULL)
            best[k] = min(best[k], time.perf_counter() - start)
    return best


def show(args: list[str], executor: list[str]) -> str:
    return "pkbsim sweep " + shlex.join([*args, *executor, "--jobs", str(JOBS)])


def report(name: str, args: list[str], repeat: int, fixed: float) -> None:
    local, dask = walls(args, repeat)
    print(f"{POINTS:,}-point simulator sweep, {name}, {JOBS} workers, target: dask <= "
          f"{TARGET:.2f} x local")
    print(f"  {local:6.2f} s  {show(args, EXECUTORS[0])}")
    print(f"  {dask:6.2f} s  {show(args, EXECUTORS[1])}")
    verdict = "ok" if dask <= TARGET * local else "MISSED"
    print(f"  ratio dask / local = {dask / local:.3f}  {verdict}")
    print(f"  overhead per point: {(dask - local) / POINTS * 1e3:.2f} ms in all, "
          f"{(dask - local - fixed) / POINTS * 1e3:.2f} ms beyond the fixed cost; load average "
          f"after: {os.getloadavg()[0]:.2f}")


PHASES = ("pkbsim sweep imported", "dask.distributed imported", "workers ready",
          "2-point sweep", "closed")


def phases_child() -> None:
    """In a fresh interpreter: the seconds each step of the Dask executor's start takes."""
    marks = [time.perf_counter()]
    from pkbsim.planning import fork_server

    fork_server.start()  # as `pkbsim sweep --executor dask` does first
    from pkbsim.planning.axes import parse_vary
    from pkbsim.planning.evaluate import Target, parse_metrics
    from pkbsim.planning.sweep import SweepSpec, run_sweep
    marks.append(time.perf_counter())
    from pkbsim.planning import dask_executor
    marks.append(time.perf_counter())
    spec = SweepSpec(Target(collective="all_reduce"), (parse_vary("size=1KiB,2KiB"),),
                     parse_metrics(["nccl_reference"]))
    with dask_executor.connect(None, JOBS) as runner:
        marks.append(time.perf_counter())
        run_sweep(spec, None, runner=runner)
        marks.append(time.perf_counter())
    marks.append(time.perf_counter())
    print(json.dumps([b - a for a, b in itertools.pairwise(marks)]))


def phases(repeat: int) -> None:
    runs = [json.loads(subprocess.run([sys.executable, __file__, "--phases-child"], check=True,
                                      capture_output=True, text=True).stdout)
            for _ in range(repeat)]
    print(f"Dask executor's fixed cost, {JOBS} workers, medians of {repeat} new interpreters:")
    for k, name in enumerate(PHASES):
        print(f"  {sorted(r[k] for r in runs)[len(runs) // 2]:5.2f} s  {name}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="keep the fastest of N runs")
    parser.add_argument("--costly", action="store_true",
                        help="also the custom_best grid (about 5 minutes a run on 2 cores)")
    parser.add_argument("--phases", action="store_true",
                        help="split the Dask executor's fixed cost into its steps instead")
    parser.add_argument("--phases-child", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.phases_child:
        phases_child()
        return
    print(f"machine: {os.cpu_count()} cores ({platform.processor() or platform.machine()}), "
          f"Python {platform.python_version()}, {platform.system()}; load average before: "
          f"{os.getloadavg()[0]:.2f} (other processes skew the figures)")
    if options.phases:
        phases(options.repeat)
        return
    tiny_local, tiny_dask = walls(TINY, options.repeat)
    fixed = tiny_dask - tiny_local
    print(f"fixed cost (2-point sweep): local {tiny_local:.2f} s, dask {tiny_dask:.2f} s "
          f"(+{fixed:.2f} s)")
    report("cheap points (nccl_reference)", CHEAP, options.repeat, fixed)
    if options.costly:
        report("costly points (nccl_reference,custom_best), one run each", COSTLY, 1, fixed)


if __name__ == "__main__":
    main()
