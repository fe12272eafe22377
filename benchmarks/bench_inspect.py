"""Speed of ``pkbsim inspect`` on a folder of solutions. Prints figures; asserts nothing (the
target, 400 solutions in under 20 s, lives in docs/measurements.md).

Two folders of N files each, copied round robin under new names: **mixed**, from the
repository's solution files (tests/data/inspect_eval*/, tests/data/solutions/, and PKB's
example solutions when ``--pkb-root`` is given), and, with ``--pkb-root``, **PKB-sized**, from
PKB's own example solutions only (2-12 kB each, CUDA and ThunderKittens sources inlined, as
generated solutions are). On each, ``pkbsim inspect DIR --format json`` runs as a new process
(Python start-up included), R times; the median and slowest wall times are printed, with the
largest file's time in one process.

Run: python benchmarks/bench_inspect.py [--files 400] [--runs 3] [--pkb-root .dev/pkb]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def sources(pkb_root: Path | None) -> list[Path]:
    found = sorted(p for d in sorted((ROOT / "tests" / "data").glob("inspect_eval*"))
                   for p in d.glob("*.py"))
    found += sorted((ROOT / "tests" / "data" / "solutions").glob("*.py"))
    return found + pkb_sources(pkb_root)


def pkb_sources(pkb_root: Path | None) -> list[Path]:
    return sorted((pkb_root / "kernelgen").glob("solution*.py")) if pkb_root else []


def build(folder: Path, files: list[Path], count: int) -> int:
    total = 0
    for i in range(count):
        src = files[i % len(files)]
        dst = folder / f"{i:04d}_{src.stem}.py"
        shutil.copyfile(src, dst)
        total += dst.stat().st_size
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=400)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pkb-root", type=Path)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python "
          f"{platform.python_version()}")
    sets = [("mixed", sources(args.pkb_root)), ("PKB-sized", pkb_sources(args.pkb_root))]
    for name, files in sets:
        if files:
            measure(name, files, args.files, args.runs)
    return 0


def measure(name: str, files: list[Path], count: int, runs: int) -> None:
    from pkbsim.inspection import inspect_file

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        size = build(folder, files, count)
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "pkbsim", "inspect", str(folder), "--format",
                            "json"], check=True, stdout=subprocess.DEVNULL,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
            times.append(time.perf_counter() - start)
    largest = max(files, key=lambda p: p.stat().st_size)
    inspect_file(largest)  # warm
    start = time.perf_counter()
    inspect_file(largest)
    one = time.perf_counter() - start
    print(f"{name}: pkbsim inspect DIR (new process), {count} files from {len(files)} distinct "
          f"({size / 1e6:.2f} MB): median {statistics.median(times):.2f} s, slowest "
          f"{max(times):.2f} s over {runs} runs "
          f"({statistics.median(times) / count * 1e3:.1f} ms per file); largest file "
          f"({largest.name}, {largest.stat().st_size / 1e3:.1f} kB) in one process: "
          f"{one * 1e3:.1f} ms")


if __name__ == "__main__":
    sys.exit(main())
