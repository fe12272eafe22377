"""Speed of ``pkbsim inspect`` on a folder of solutions. Prints figures; asserts nothing (the
target, 400 solutions in under 20 s, lives in docs/measurements.md).

The folder is built from the repository's solution files (tests/data/inspect_eval/,
tests/data/solutions/, and PKB's example solutions when ``--pkb-root`` is given), copied round
robin under new names until it holds N files; then ``pkbsim inspect DIR --format json`` runs as
a new process (Python start-up included), R times, and the median and slowest wall times are
printed, with the largest file's time in one process.

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
    found = sorted((ROOT / "tests" / "data" / "inspect_eval").glob("*.py"))
    found += sorted((ROOT / "tests" / "data" / "solutions").glob("*.py"))
    if pkb_root is not None:
        found += sorted((pkb_root / "kernelgen").glob("solution*.py"))
    return found


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
    files = sources(args.pkb_root)
    if not files:
        sys.stderr.write("bench_inspect: no solution files found\n")
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        size = build(folder, files, args.files)
        times = []
        for _ in range(args.runs):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "pkbsim", "inspect", str(folder), "--format",
                            "json"], check=True, stdout=subprocess.DEVNULL,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
            times.append(time.perf_counter() - start)
    sys.path.insert(0, str(ROOT))
    from pkbsim.inspection import inspect_file

    largest = max(files, key=lambda p: p.stat().st_size)
    start = time.perf_counter()
    inspect_file(largest)
    one = time.perf_counter() - start
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python "
          f"{platform.python_version()}")
    print(f"pkbsim inspect DIR (new process): {args.files} files from {len(files)} distinct "
          f"({size / 1e6:.2f} MB): median {statistics.median(times):.2f} s, slowest "
          f"{max(times):.2f} s over {args.runs} runs "
          f"({statistics.median(times) / args.files * 1e3:.1f} ms per file)")
    print(f"largest file ({largest.name}, {largest.stat().st_size / 1e3:.1f} kB) in one "
          f"process: {one * 1e3:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
