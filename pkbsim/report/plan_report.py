"""``pkbsim plan`` rendered: each derived answer as a headed table, or ``pkbsim.plan/1`` JSON.

The answers (pkbsim.planning.derived and derived_task) come in finished; the command's inputs
are passed along for the heading and the JSON document.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.table import Table

from pkbsim.files import json_text
from pkbsim.planning.derived import Crossover, ThresholdResult
from pkbsim.planning.derived_task import LatencyExit, SmSplit
from pkbsim.report.text import to_text
from pkbsim.units import format_bytes

SCHEMA = "pkbsim.plan/1"
REDUCING = ("all_reduce", "reduce_scatter", "reduce")


def plan_json(command: str, inputs: dict[str, Any], results: Any) -> str:
    doc = {"schema": SCHEMA, "command": command, "inputs": inputs, "results": results}
    return json_text(doc, indent=2) + "\n"


def threshold_table(results: Sequence[ThresholdResult], collective: str, topology: str,
                    world_size: int, fraction: float, algorithm: str | None, lo: int,
                    hi: int) -> str:
    line = results[0].line_rate_busbw_GBps if results else 0.0
    head = (f"{collective} on {topology}, {world_size} ranks: smallest message (bytes per rank) "
            f"with busbw >= {fraction:g} x line rate {line:.4g} GB/s = {fraction * line:.4g} "
            f"GB/s\n(one bare call simulated, best algorithm per size"
            f"{'' if algorithm is None else ' forced to ' + algorithm}; searched {_b(lo)} to "
            f"{_b(hi)}, to 1%)")
    rows = [[r.mechanism, _b(r.size_bytes), str(r.size_bytes or "-"), r.algorithm or "-",
             "-" if r.busbw_at_size_GBps is None else f"{r.busbw_at_size_GBps:.4g}",
             f"{r.max_busbw_GBps:.4g}", _b(r.max_busbw_at_bytes)] for r in results]
    notes = ["'-': not reached up to the upper size"]
    if collective in REDUCING and any(r.mechanism == "nvls_multimem" for r in results):
        notes.append("nvls_multimem: NVLS's busbw is not wire bandwidth (docs/metrics.md 1)")
    return _table("Threshold per mechanism", head,
                  ["mechanism", "size", "bytes", "algorithm", "busbw GB/s", "max busbw GB/s",
                   "max at"], rows, notes)


def crossover_table(results: Sequence[Crossover], collective: str, topology: str,
                    world_size: int, contenders: str, skipped: Sequence[str], lo: int,
                    hi: int) -> str:
    head = (f"{collective} on {topology}, {world_size} ranks: fastest of {contenders} (one "
            f"bare call simulated; sizes in bytes per rank, {_b(lo)} to {_b(hi)}, located to "
            "1%)")
    rows = [[f"{_b(c.size_bytes)} ({c.size_bytes})", f"{c.below} ({c.below_how})",
             f"{c.above} ({c.above_how})", f"{c.below_time_us:.4g}", f"{c.above_time_us:.4g}"]
            for c in results]
    notes = [] if results else ["no crossover: one contender is fastest over the whole range"]
    notes += [f"skipped {s}" for s in skipped]
    return _table("Crossovers (times at the crossing, us)", head,
                  ["size", "faster below", "faster from here", "t below", "t above"], rows,
                  notes)


def sm_split_table(res: SmSplit) -> str:
    head = (f"Task {res.task} on {res.topology}, {res.world_size} ranks, preset {res.preset}: "
            f"custom_best with every comm op holding s of {res.sm_count} SMs\n"
            f"Best: {res.best_sms} SMs, {res.best_time_us:.4g} us; default (each mechanism's "
            f"sms_to_saturate: {', '.join(map(str, res.default_sms)) or '-'}): "
            f"{res.default_time_us:.4g} us ({'; '.join(res.default_carriers)})")
    rows = [[str(p.sms), f"{p.time_us:.4g}", "; ".join(p.carriers)
             + ("  <- best" if p.sms == res.best_sms else "")] for p in res.curve]
    return _table("Predicted time per SM count", head, ["SMs", "custom_best us", "carried by"],
                  rows)


def latency_exit_text(res: LatencyExit, param: str) -> str:
    head = (f"Task {res.task} on {res.topology}, {res.world_size} ranks, preset {res.preset}: "
            f"{param} = {res.start_value} is {res.start_binding}-bound")
    if res.value is None:
        what = ("no value up to " if res.direction == "up" else "no value down to ")
        answer = f"{what}{res.other_value:,} changes the binding"
    elif res.direction == "up":
        answer = (f"leaves the latency regime at {param} = {res.value:,} (binding "
                  f"{res.binding}, t_roof {res.t_roof_us:.4g} us); {res.other_value:,} is "
                  "still latency-bound")
    else:
        answer = (f"largest latency-bound value: {param} = {res.value:,} (t_roof "
                  f"{res.t_roof_us:.4g} us); {res.other_value:,} is {res.start_binding}-bound")
    return head + "\n" + answer + "\n"


def _table(title: str, head: str, columns: list[str], rows: list[list[str]],
           notes: list[str] | None = None) -> str:
    table = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
    for i, col in enumerate(columns):
        table.add_column(col, justify="left" if i == 0 else "right", overflow="fold")
    for row in rows:
        table.add_row(*row)
    return head + "\n" + to_text(table) + "".join(f"{n}\n" for n in notes or [])


def _b(n: float | None) -> str:
    return "-" if n is None else format_bytes(n)
