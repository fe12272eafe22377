"""``pkbsim run``: PKB's reference and a candidate, checked and timed under torchrun; a table.

Exit code 0 when both are ok, 1 when either is wrong, crashed or hung, 2 for a bad option, 130
on Ctrl-C or SIGTERM (the children are killed first). Progress goes to stderr, the table to
stdout.
"""

from __future__ import annotations

import sys
from pathlib import Path

from rich.table import Table

from pkbsim.compare.pkb_runner import RunOptions, RunResult, VariantResult, run_problem
from pkbsim.report.table import to_text
from pkbsim.units import US, format_us
from pkbsim.validation.validate_cmd import terminate_as_interrupt


def run_command(pkb_root: Path, problem: str, solution: Path, world_size: int | None,
                out: Path, timeout_s: float, device: str) -> None:
    options = RunOptions(world_size=world_size, device=device, timeout_s=timeout_s)

    def started(backend: str, console: Path) -> None:
        sys.stderr.write(f"pkbsim run: {backend} (log {console})\n")
        sys.stderr.flush()

    try:
        with terminate_as_interrupt():  # a batch system's SIGTERM kills the children too
            result = run_problem(pkb_root, problem, solution, out, options, on_start=started)
    except KeyboardInterrupt:
        sys.stderr.write("pkbsim: interrupted; the run's processes were killed\n")
        raise SystemExit(130) from None
    sys.stdout.write(result_table(result, device))
    if any(v.status != "ok" for v in (result.reference, result.candidate)):
        raise SystemExit(1)


def result_table(result: RunResult, device: str) -> str:
    problem = result.problem
    sizes = {v.world_size for v in (result.reference, result.candidate) if v.world_size}
    ranks = f"{'/'.join(map(str, sorted(sizes)))} ranks" if sizes else "no rank started"
    head = (f"Problem {problem.stem} ({problem.reference}), {ranks}, device {device}; "
            "times are PKB's wall_time_ms per iteration, in us\n")
    table = Table(show_edge=False, pad_edge=False)
    for column in ("variant", "backend", "status", "per-rank time us", "slowest us", "note"):
        table.add_column(column, overflow="fold")
    for name, variant in (("reference", result.reference), ("candidate", result.candidate)):
        table.add_row(name, variant.backend, variant.status, _per_rank(variant),
                      _slowest(variant), variant.error or "")
    speedup = result.speedup
    tail = f"Speedup (reference / candidate, slowest ranks): {speedup:.3g}x\n" if speedup else ""
    folders = ", ".join(str(v.logs_dir) for v in (result.reference, result.candidate))
    return head + to_text(table) + tail + f"Logs (PKB's format): {folders}\n"


def _per_rank(variant: VariantResult) -> str:
    return " ".join(format_us(r.time_us * US) for r in variant.ranks) or "-"


def _slowest(variant: VariantResult) -> str:
    slowest = variant.slowest
    return f"{format_us(slowest.time_us * US)} (rank {slowest.rank})" if slowest else "-"
