"""Wall time of ``pkbsim sweep`` against issue 7's performance targets.

(a) a 1,000-point sweep of the analytical roofline: under 5 s (one worker and every core);
(b) a simulator sweep on 2 cores takes at most 0.6 x its single-core time.

Each figure is one ``python -m pkbsim sweep ...`` child process (imports included), output
discarded; ``--repeat N`` keeps the fastest of N. Run: ``python benchmarks/bench_sweep.py``.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import subprocess
import sys
import time

ROOFLINE = ["--task", "grpo", "--vary", "scale_up.link_bandwidth_GBps=1:1000:+1",
            "--metric", "roofline", "--format", "csv"]
SIMULATOR = ["--collective", "all_reduce", "--sizes", "1KiB:256MiB:x2",
             "--vary", "topology=dgx-h100,hgx-b200,gb200-nvl72", "--vary", "world_size=4,8",
             "--metric", "nccl_reference,custom_best", "--format", "csv"]
ROOFLINE_TARGET_S = 5.0
SCALING_TARGET = 0.6


def wall_s(args: list[str], jobs: int, repeat: int) -> float:
    command = [sys.executable, "-m", "pkbsim", "sweep", *args, "--jobs", str(jobs)]
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        best = min(best, time.perf_counter() - start)
    return best


def show(args: list[str], jobs: int) -> str:
    return "pkbsim sweep " + shlex.join([*args, "--jobs", str(jobs)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="keep the fastest of N runs")
    repeat = parser.parse_args().repeat
    cores = os.cpu_count() or 1
    print(f"machine: {cores} cores ({platform.processor() or platform.machine()}), "
          f"Python {platform.python_version()}, {platform.system()}; load average before: "
          f"{os.getloadavg()[0]:.2f} (other processes skew the figures)")
    print("(a) 1,000-point roofline sweep, target < 5 s")
    for jobs in sorted({1, cores}):
        t = wall_s(ROOFLINE, jobs, repeat)
        verdict = "ok" if t < ROOFLINE_TARGET_S else "MISSED"
        print(f"  {t:6.2f} s  {verdict}  {show(ROOFLINE, jobs)}")
    print("(b) simulator sweep (114 points), target: 2 workers <= 0.6 x 1 worker")
    one = wall_s(SIMULATOR, 1, repeat)
    two = wall_s(SIMULATOR, 2, repeat)
    print(f"  {one:6.2f} s  {show(SIMULATOR, 1)}")
    print(f"  {two:6.2f} s  {show(SIMULATOR, 2)}")
    verdict = "ok" if two <= SCALING_TARGET * one else "MISSED"
    print(f"  ratio 2 workers / 1 worker = {two / one:.2f}  {verdict}; load average after: "
          f"{os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
