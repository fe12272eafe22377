"""Cost of ``import pkbsim`` (the Python API loads its names on first use). Prints figures;
asserts nothing (the target, under 0.2 s added to a bare interpreter, lives in
docs/measurements.md).

1. ``python -c "import pkbsim"`` against ``python -c "pass"``, each a new process, taking
   turns: the medians of N runs and their difference.
2. Which heavy packages ``import pkbsim`` loads (numpy, scipy, simpy, typer, rich, matplotlib,
   pandas, PyYAML, torch, dask): none is expected.
3. For scale: ``import pkbsim; pkbsim.analyze`` (the API module, still light) and a first
   ``pkbsim.analyze("grpo")`` (loads the analyzer and the simulator).

Run: python benchmarks/bench_import.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time

HEAVY = ("numpy", "scipy", "simpy", "typer", "rich", "matplotlib", "pandas", "yaml", "torch",
         "dask")
TARGET_S = 0.2


def child_s(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - start


def medians(codes: dict[str, str], runs: int) -> dict[str, tuple[float, float, float]]:
    """Median, min and max wall time of each snippet as a new process; the snippets take
    turns, so drift in the machine's load falls on all of them alike."""
    times: dict[str, list[float]] = {name: [] for name in codes}
    for code in codes.values():  # warm the file cache once
        child_s(code)
    for _ in range(runs):
        for name, code in codes.items():
            times[name].append(child_s(code))
    return {name: (statistics.median(t), min(t), max(t)) for name, t in times.items()}


def heavy_modules() -> list[str]:
    code = ("import sys, pkbsim; "
            f"print(','.join(sorted({{m.split('.')[0] for m in sys.modules}} & {set(HEAVY)!r})))")
    done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                          text=True)
    return [m for m in done.stdout.strip().split(",") if m]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args()
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, load average "
          f"{os.getloadavg()[0]:.2f}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    codes = {"bare": "pass", "import pkbsim": "import pkbsim",
             "pkbsim.analyze (the API module)": "import pkbsim; pkbsim.analyze",
             "first pkbsim.analyze('grpo')": "import pkbsim; pkbsim.analyze('grpo')"}
    found = medians(codes, args.runs)
    bare = found["bare"][0]
    for name, (med, lo, hi) in found.items():
        print(f"{name:34s} median {med:.3f} s (min {lo:.3f}, max {hi:.3f})"
              + ("" if name == "bare" else f"; added {med - bare:+.3f} s"))
    added = found["import pkbsim"][0] - bare
    print(f"import pkbsim adds {added:.3f} s to a bare interpreter (median of {args.runs}); "
          f"target < {TARGET_S} s: {'ok' if added < TARGET_S else 'MISSED'}")
    heavy = heavy_modules()
    print("heavy packages loaded by import pkbsim: " + (", ".join(heavy) or "none"))


if __name__ == "__main__":
    main()
