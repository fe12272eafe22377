"""Wall time of one command at each bound on work (docs/limits.md, "Time at each bound").

Each case builds its input in a temporary folder, at the bound's default (or past it, for a
bound counted as the work grows: the time is then the time until the refusal), and times one
``python -m pkbsim ...`` child process, imports included. The figures in docs/limits.md come
from ``python benchmarks/bench_limits.py`` on the 2-core VM, one case after another.

Run: ``python benchmarks/bench_limits.py [CASE ...]`` (all cases: about 10 minutes).
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GRPO = ROOT / "tasks" / "83_vocab_parallel_log_prob_topk_chunked.yaml"
SOLUTIONS = [*sorted((ROOT / "tests" / "data").glob("inspect_eval*/*.py")),
             *sorted((ROOT / "tests" / "data" / "solutions").rglob("*.py"))]
MiB = 2**20


def many_ops(path: Path, n: int) -> Path:
    """``n`` all-reduces of distinct sizes (task 13's parameters)."""
    head = (ROOT / "tasks" / "13_gemm_allreduce.yaml").read_text().split("\nops:")[0]
    ops = "".join(f'  - id: ar{i}\n    kind: all_reduce\n    elements_per_rank: "M * N + {i}"\n'
                  "    dtype: bf16\n    reduce_op: sum\n" for i in range(n))
    path.write_text(head.replace("\naliases: [gemm_ar]", "") + "\nops:\n" + ops)
    return path


def solutions(folder: Path, total_bytes: int, one_file: bool) -> None:
    """Copies of the test suite's solution files, up to ``total_bytes``: in one file, or one
    file each."""
    texts, size, i = [p.read_text() for p in SOLUTIONS], 0, 0
    parts = []
    while size + len(texts[i % len(texts)].encode()) + 1 <= total_bytes:
        parts.append(texts[i % len(texts)])
        size += len(parts[-1].encode()) + 1
        i += 1
    if one_file:
        (folder / "one.py").write_text("\n".join(parts))
    else:
        for k, text in enumerate(parts):
            (folder / f"s{k}.py").write_text(text)


def case_walk_entries(d: Path) -> list[str]:
    (d / "a.py").write_text("def solution(x):\n    return x\n")
    for i in range(99_999):  # with a.py: 100,000 entries, the bound
        (d / f"f{i}.txt").write_text("")
    return ["inspect", str(d), "--format", "json"]


def case_source_files(d: Path) -> list[str]:
    for i in range(10_000):
        (d / f"s{i}.py").write_text("def solution(x):\n    return x\n")
    return ["inspect", str(d), "--format", "json"]


def case_source_bytes(d: Path) -> list[str]:
    solutions(d, MiB, one_file=True)
    return ["inspect", str(d / "one.py"), "--format", "json"]


def case_source_total_bytes(d: Path) -> list[str]:
    solutions(d, 8 * MiB, one_file=False)
    return ["inspect", str(d), "--format", "json"]


def case_input_bytes(d: Path) -> list[str]:
    text = GRPO.read_text()
    line = "#" + "x" * 1022 + "\n"
    with open(d / "big.yaml", "w") as f:
        f.write(text + line * ((256 * MiB - len(text.encode())) // len(line)))
    return ["analyze", "--task", str(d / "big.yaml"), "--no-predict"]


def case_nesting(d: Path) -> list[str]:
    nest = "notes_:\n" + "".join("  " * k + "b:\n" for k in range(1, 99)) + "  " * 99 + "c: 1\n"
    (d / "nest.yaml").write_text(GRPO.read_text() + nest)  # refused after the check: a field
    return ["analyze", "--task", str(d / "nest.yaml"), "--no-predict"]


def case_task_ops(d: Path) -> list[str]:
    return ["analyze", "--task", str(many_ops(d / "ops.yaml", 10_000)), "--no-predict"]


def case_sim_nodes(d: Path) -> list[str]:
    # 41,663 repeats: 1,999,992 timed nodes for the task file's reference model
    (d / "nodes.yaml").write_text(GRPO.read_text().replace("repeat: n_chunks",
                                                           "repeat: 41663", 1))
    return ["simulate", "--task", str(d / "nodes.yaml"), "--reference-model", "task"]


def case_sim_calls(d: Path) -> list[str]:
    (d / "one_run.yaml").write_text("base: custom_best\nchunks: 1\n")
    # 2,500 comm ops x 4 candidates: 10,000 calls alone, then the run
    return ["simulate", "--task", str(many_ops(d / "ops.yaml", 2_500)), "--strategy",
            str(d / "one_run.yaml")]


def case_sim_flows(d: Path) -> list[str]:
    (d / "eight.yaml").write_text("base: custom_best\nchunks: 8\n")
    # about 50 million transfers wanted: refused when the 10,000,001st starts
    return ["simulate", "--task", str(many_ops(d / "ops.yaml", 1_000)), "--strategy",
            str(d / "eight.yaml"), "--topology", "h100-ib-4node", "--world-size", "32"]


def case_sweep_points(d: Path) -> list[str]:
    # 100,000 points (and an axis of 100,000 values), on every core
    return ["sweep", "--collective", "all_reduce", "--sizes", "1:100000:+1", "--metric",
            "t_roof", "--format", "csv", "--out", str(d / "sweep.csv")]


def case_cpu_ranks(d: Path) -> list[str]:
    # 64 gloo ranks (one process each) of the test suite's tiny PKB problem, no profiling
    tiny = ROOT / "tests" / "data" / "pkb_tiny"
    return ["run", "--pkb-root", str(tiny), "--problem", "1", "--solution",
            str(tiny / "solutions" / "1_tiny_allreduce_ok.py"), "--device", "cpu",
            "--world-size", "64", "--profile-iters", "0", "--out", str(d / "run")]


CASES: dict[str, Callable[[Path], list[str]]] = {
    name.removeprefix("case_"): fn for name, fn in globals().items()
    if name.startswith("case_")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("cases", nargs="*", choices=[*CASES, []], help="default: all")
    names = parser.parse_args().cases or list(CASES)
    print(f"machine: {os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f}")
    for name in names:
        with tempfile.TemporaryDirectory() as tmp:
            args = CASES[name](Path(tmp))
            start = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "pkbsim", *args], cwd=ROOT,
                                  capture_output=True, text=True)
            wall = time.perf_counter() - start
        last = (done.stderr.strip().splitlines() or [""])[-1][:160]
        print(f"{name:20s} {wall:7.1f} s  exit {done.returncode}  "
              f"pkbsim {shlex.join(args).replace(tmp, 'TMP')[:90]}  {last}", flush=True)


if __name__ == "__main__":
    main()
