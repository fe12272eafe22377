"""``pkbsim run`` rendered: the reference and the candidate, each with its status, per-rank
times and the slowest rank, and the speed-up."""

from __future__ import annotations

from rich.table import Table

from pkbsim.pkb.runner import RunResult, VariantResult
from pkbsim.report.text import to_text
from pkbsim.units import US, format_us


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
