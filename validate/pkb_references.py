"""Time many of PKB's references in one torchrun job (torch and NCCL start once).

    python -m torch.distributed.run --standalone --nproc-per-node W validate/pkb_references.py \
        --pkb-root PKB --logs-dir OUT/logs --status-dir OUT/status --summary OUT/summary.json \
        [--only 1,13,83 | --skip 48] [--device cuda|cpu] [--problem-timeout 60] [--profile-iters 20]
        [--sizes 1024x1024,4096x1024]

For each ``reference/<id>_<name>.py`` of the checkout (sorted by id, or those in --only) it runs
validate/pkb_run.py's reference path: PKB's inputs, one checked call, then PKB's timing
(500 warm-up and 100 timed iterations, L2-rotating input groups), writing
``logs/problem_<stem>/reference/rank_<r>_perf.json`` in PKB's format. A problem that raises
(say, it needs more ranks) or runs past --problem-timeout (a Python-level alarm) is recorded in
the summary and the next one runs; rank 0 writes ``--summary`` after every problem.

Each summary row also has the timed iterations' median and quartiles (PKB's mean is sensitive to
one slow iteration) and, on CUDA with --profile-iters N > 0, what one call costs: the host's time
to issue it (N calls without synchronising, then one synchronisation), and under torch.profiler
the kernels (and copies) per call, the NCCL kernels among them, the GPU's busy time (union of
their intervals) and the host operators with the most self time (inflated by the profiler;
for ranking), each call's time between CUDA events under the profiler (``call_event_us``),
and the profiled calls' Kineto trace, kept as ``rank_<r>_trace.json.gz`` beside the perf file
(validate/pkb_run.py says how, and how it is bounded). Between problems the process frees
what it can (gc, the caching allocator) and records the GPU's free memory, so that a problem
that leaks (say, a communicator per call) is seen.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import signal
import statistics
import sys
import time
import traceback
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pkb_run  # the script beside this one

TOP_HOST_OPS = 6


class ProblemTimeout(Exception):
    pass


def _alarm(_signum: int, _frame: FrameType | None) -> None:
    raise ProblemTimeout("past --problem-timeout")


def references(root: Path, only: set[int] | None, skip: frozenset[int] | set[int] = frozenset()
               ) -> list[tuple[int, Path]]:
    out = []
    for path in (root / "reference").glob("*.py"):
        head = path.stem.split("_", 1)[0]
        if head.isdigit() and (only is None or int(head) in only) and int(head) not in skip:
            out.append((int(head), path))
    return sorted(out)


def ids(text: str) -> set[int]:
    return {int(x) for x in text.split(",") if x.strip()}


def spread(per_iter_ms: list[float]) -> dict[str, float]:
    """Median and quartiles of the timed iterations, in µs."""
    if len(per_iter_ms) < 2:
        return {}
    q1, q2, q3 = statistics.quantiles(per_iter_ms, n=4)
    return {"median_us": q2 * 1e3, "p25_us": q1 * 1e3, "p75_us": q3 * 1e3}


def merged(intervals: list[tuple[float, float]]) -> float:
    """Total length of the union of [start, end] intervals."""
    total, end = 0.0, float("-inf")
    for lo, hi in sorted(intervals):
        if hi <= end:
            continue
        total += hi - max(lo, end)
        end = hi
    return total


def call_profile(fn: Any, inputs: tuple[Any, ...], iters: int,
                 trace_path: Path | None = None) -> dict[str, Any]:
    """Host issue time, kernels and GPU busy time per call (no GPU: no kernels); with
    ``trace_path``, the profiled calls' Kineto trace kept there (pkb_run.keep_trace)."""
    import torch
    from torch.profiler import DeviceType

    cuda = torch.cuda.is_available()

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    fn(*inputs)
    sync()
    start = time.perf_counter()
    for _ in range(iters):
        fn(*inputs)
    issued = time.perf_counter()
    sync()
    done = time.perf_counter()
    prof, call_us = pkb_run.profiled_run(fn, inputs, cuda, iters)
    gpu = [e for e in prof.events() if e.device_type == DeviceType.CUDA
           and pkb_run.event_kind(e) in ("kernel", "memcpy", "memset")]
    spans = [(e.time_range.start, e.time_range.end) for e in gpu]
    cpu = sorted((e for e in prof.key_averages() if e.device_type == DeviceType.CPU),
                 key=lambda e: -e.self_cpu_time_total)
    top = [[e.key, round(e.self_cpu_time_total / iters, 2), e.count / iters]
           for e in cpu[:TOP_HOST_OPS]]
    kept = pkb_run.keep_trace(prof, trace_path) if trace_path is not None else {}
    return {**kept, "call_event_us": call_us,
            "top_host_ops": top,  # [name, self host µs per call (profiled), calls per call]
            "host_issue_us": (issued - start) / iters * 1e6,
            "host_wall_us": (done - start) / iters * 1e6,
            "gpu_ops_per_call": len(gpu) / iters,
            "nccl_kernels_per_call": sum("nccl" in e.name.lower() for e in gpu) / iters,
            "gpu_busy_us": merged(spans) / iters}


def tidy() -> dict[str, float]:
    """Free what the last problem left (gc, the caching allocator); the GPU's free memory."""
    import torch

    gc.collect()
    if not torch.cuda.is_available():
        return {}
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    free, _total = torch.cuda.mem_get_info()
    return {"gpu_free_GiB_after": free / 2**30}


def profiled(args: Any, rank: int, world_size: int, dev: Any, iters: int) -> dict[str, Any]:
    """call_profile of the reference on trial 0's inputs, its trace kept beside its perf file
    (``rank_<r>_trace.json.gz``); a failure is noted, not raised."""
    try:
        fn = pkb_run.solution_of(args.reference, "pkb_reference")
        return call_profile(fn, pkb_run.input_maker(args, rank, world_size, dev)(0), iters,
                            Path(args.logs_dir) / f"rank_{rank}_trace.json.gz")
    except ProblemTimeout:
        raise
    except Exception as exc:
        return {"profile_error": pkb_run.one_line(f"{type(exc).__name__}: {exc}")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pkb-root", required=True)
    parser.add_argument("--logs-dir", required=True)
    parser.add_argument("--status-dir", required=True)
    parser.add_argument("--summary", required=True)
    parser.add_argument("--only", default="")
    parser.add_argument("--skip", default="")
    parser.add_argument("--profile-iters", type=int, default=0)
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--problem-timeout", type=float, default=60.0)
    parser.add_argument("--sizes", default="1024x1024",
                        help="ROWSxCOLS,... (PKB's --m x --n); each problem runs at each")
    opts = parser.parse_args()
    sizes = [tuple(int(x) for x in item.split("x")) for item in opts.sizes.split(",") if item]
    only = ids(opts.only) or None
    rank, world_size, dev = pkb_run.setup(opts.device)
    signal.signal(signal.SIGALRM, _alarm)
    summary: dict[str, Any] = {"world_size": world_size, "device": opts.device, "problems": []}
    for (pid, path), (rows, cols) in ((ref, size) for ref in references(
            Path(opts.pkb_root), only, ids(opts.skip)) for size in sizes):
        tag = "" if (rows, cols) == (1024, 1024) else f"_m{rows}_n{cols}"
        args = pkb_run.parse_args([
            "--pkb-root", opts.pkb_root, "--reference", str(path), "--problem-id", str(pid),
            "--logs-dir", os.path.join(opts.logs_dir, f"problem_{path.stem}{tag}", "reference"),
            "--status-dir", os.path.join(opts.status_dir, path.stem + tag),
            "--device", opts.device, "--rows", str(rows), "--cols", str(cols)])
        status = pkb_run.Status(args.status_dir, rank, world_size, "reference")
        row: dict[str, Any] = {"problem": path.stem, "rows": rows, "cols": cols,
                               "status": "ok", "error": None}
        signal.setitimer(signal.ITIMER_REAL, opts.problem_timeout)
        try:
            per_iter = pkb_run.run(args, status, rank, world_size, dev)
            row.update(spread(per_iter))
            if per_iter:  # PKB's wall_time_ms: the mean of the timed iterations
                row["mean_us"] = statistics.fmean(per_iter) * 1e3
            if opts.profile_iters > 0 and dev.type == "cuda":
                row.update(profiled(args, rank, world_size, dev, opts.profile_iters))
        except Exception as exc:  # one problem's failure must not stop the others
            row["status"] = "timeout" if isinstance(exc, ProblemTimeout) else "crash"
            row["error"] = pkb_run.one_line(f"{type(exc).__name__}: {exc}")
            traceback.print_exc()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        row.update(tidy())
        summary["problems"].append(row)
        print(f"pkb_references: {path.stem} {rows}x{cols}: {row['status']} {row['error'] or ''}",
              flush=True)
        if rank == 0:
            Path(opts.summary).write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
