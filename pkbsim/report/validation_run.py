"""``pkbsim validate`` rendered: the registered cases, and a run's summary per case."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from rich.table import Table

from pkbsim.report.text import to_text
from pkbsim.validation.cases import Case
from pkbsim.validation.results import STATUSES, Results


def case_table(cases: list[Case]) -> str:
    table = _table("key", "GPUs", "launcher", "limit s (quick)", "description")
    for case in cases:
        launcher = case.launcher + (", multicast" if case.multicast else "")
        table.add_row(case.key, str(case.gpus), launcher,
                      f"{case.timeout_s:g} ({case.quick_timeout_s:g})", case.description)
    return to_text(table)


def summary(results: Results, ran: set[str]) -> str:
    env = results.environment
    gpu = f"{env.get('gpu_count', 0)} x {env['gpu_name']}" if env.get("gpu_name") else "no GPU"
    soft = ", ".join(f"{name} {env[name]}" for name in ("driver", "cuda", "nccl", "torch")
                     if env.get(name))
    table = _table("case", "status", "measurements", "elapsed s", "note")
    counts: Counter[str] = Counter()
    for case in results.cases:
        if case.key not in ran:
            continue
        counts[case.status] += 1
        table.add_row(case.key, case.status, str(len(case.measurements)),
                      f"{case.elapsed_s:.1f}", case.error or "")
    tally = ", ".join(f"{counts[s]} {s}" for s in STATUSES if counts[s])
    folder = Path(results.file).parent
    return (f"Machine {env.get('hostname')}: {gpu}" + (f" ({soft})" if soft else "") + "\n"
            + to_text(table)
            + f"{tally}. Results: {results.file} (logs in {folder / 'logs'})\n")


def _table(*columns: str) -> Table:
    table = Table(show_edge=False, pad_edge=False)
    for col in columns:
        table.add_column(col, overflow="fold")
    return table
