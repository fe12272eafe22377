"""Time many of PKB's references in one torchrun job (torch and NCCL start once).

    python -m torch.distributed.run --standalone --nproc-per-node W validate/pkb_references.py \
        --pkb-root PKB --logs-dir OUT/logs --status-dir OUT/status --summary OUT/summary.json \
        [--only 1,13,83] [--device cuda|cpu] [--problem-timeout 60]

For each ``reference/<id>_<name>.py`` of the checkout (sorted by id, or those in --only) it runs
validate/pkb_run.py's reference path: PKB's inputs, one checked call, then PKB's timing
(500 warm-up and 100 timed iterations, L2-rotating input groups), writing
``logs/problem_<stem>/reference/rank_<r>_perf.json`` in PKB's format. A problem that raises
(say, it needs more ranks) or runs past --problem-timeout (a Python-level alarm) is recorded in
the summary and the next one runs; rank 0 writes ``--summary`` after every problem.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import traceback
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pkb_run  # the script beside this one


class ProblemTimeout(Exception):
    pass


def _alarm(_signum: int, _frame: FrameType | None) -> None:
    raise ProblemTimeout("past --problem-timeout")


def references(root: Path, only: set[int] | None) -> list[tuple[int, Path]]:
    out = []
    for path in (root / "reference").glob("*.py"):
        head = path.stem.split("_", 1)[0]
        if head.isdigit() and (only is None or int(head) in only):
            out.append((int(head), path))
    return sorted(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pkb-root", required=True)
    parser.add_argument("--logs-dir", required=True)
    parser.add_argument("--status-dir", required=True)
    parser.add_argument("--summary", required=True)
    parser.add_argument("--only", default="")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--problem-timeout", type=float, default=60.0)
    opts = parser.parse_args()
    only = {int(x) for x in opts.only.split(",") if x.strip()} or None
    rank, world_size, dev = pkb_run.setup(opts.device)
    signal.signal(signal.SIGALRM, _alarm)
    summary: dict[str, Any] = {"world_size": world_size, "device": opts.device, "problems": []}
    for pid, path in references(Path(opts.pkb_root), only):
        args = pkb_run.parse_args([
            "--pkb-root", opts.pkb_root, "--reference", str(path), "--problem-id", str(pid),
            "--logs-dir", os.path.join(opts.logs_dir, f"problem_{path.stem}", "reference"),
            "--status-dir", os.path.join(opts.status_dir, path.stem),
            "--device", opts.device])
        status = pkb_run.Status(args.status_dir, rank, world_size, "reference")
        row: dict[str, Any] = {"problem": path.stem, "status": "ok", "error": None}
        signal.setitimer(signal.ITIMER_REAL, opts.problem_timeout)
        try:
            pkb_run.run(args, status, rank, world_size, dev)
        except Exception as exc:  # one problem's failure must not stop the others
            row["status"] = "timeout" if isinstance(exc, ProblemTimeout) else "crash"
            row["error"] = pkb_run.one_line(f"{type(exc).__name__}: {exc}")
            traceback.print_exc()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        summary["problems"].append(row)
        print(f"pkb_references: {path.stem}: {row['status']} {row['error'] or ''}", flush=True)
        if rank == 0:
            Path(opts.summary).write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
