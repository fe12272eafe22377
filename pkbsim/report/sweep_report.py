"""``pkbsim sweep`` results as a terminal table, CSV, Markdown, JSON (``pkbsim.sweep/1``) or
one HTML page.

CSV and JSON hold numbers in their units (times in us, bandwidths in GB/s = 1e9 B/s, sizes in
bytes): JSON as computed, CSV to 10 significant digits; the table and Markdown show sizes
human-readable and numbers rounded. Fields are a contract:
add, never rename or remove without a schema bump.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any

from pkbsim import __version__
from pkbsim.files import json_text
from pkbsim.planning.sweep import NOT_APPLICABLE, SweepResult
from pkbsim.report import html_page as page
from pkbsim.report.html_page import Provenance
from pkbsim.report.text import csv_value, to_text
from pkbsim.units import format_bytes

SCHEMA = "pkbsim.sweep/1"
SIZE_AXES = ("size",)


def fields(result: SweepResult) -> list[str]:
    """Every row's fields: the axis names, the metric columns, error, then not_applicable (why
    a point does not apply: a preset its task lacks; no failure)."""
    return [*result.spec.axis_names, *result.columns, "error", NOT_APPLICABLE]


def row_dict(result: SweepResult, row: dict[str, Any]) -> dict[str, Any]:
    return {name: row.get(name) for name in fields(result)}


def to_dict(result: SweepResult) -> dict[str, Any]:
    spec = result.spec
    header = spec.header()
    counts = result.counts
    return {"schema": SCHEMA, "pkbsim_version": __version__, "target": header["target"],
            "axes": header["axes"], "metrics": list(spec.metrics), "columns": result.columns,
            "counts": {"points": len(result.rows), "ok": counts.ok, "failed": counts.failed,
                       "not_applicable": counts.not_applicable, "resumed": counts.resumed,
                       "computed": counts.computed},
            "rows": [row_dict(result, r) for r in result.rows]}


def render_json(result: SweepResult) -> str:
    return json_text(to_dict(result), indent=2) + "\n"


def render_csv(result: SweepResult) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=fields(result), lineterminator="\n")
    writer.writeheader()
    for row in result.rows:
        writer.writerow({k: csv_value(v) for k, v in row_dict(result, row).items()})
    return buffer.getvalue()


def cell(name: str, value: Any) -> str:
    """One value as shown to a reader: sizes in KiB/MiB/GiB, numbers to 4 significant digits."""
    if value is None:
        return "-"
    if isinstance(value, bool | str):
        return str(value)
    if name in SIZE_AXES and isinstance(value, int | float):
        return format_bytes(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value == 0:
            return "0"
        if abs(value) >= 1e4:
            return f"{value:,.0f}"
        return f"{value:.4g}"
    return str(value)


def heading(result: SweepResult) -> str:
    spec = result.spec
    t = spec.target
    where = [] if "topology" in spec.axis_names else [f"on {t.topology}"]
    if t.task is not None and "preset" not in spec.axis_names:
        where.append(f"preset {t.preset}")
    c = result.counts
    done = f"{len(result.rows)} points: {c.ok} ok, {c.failed} failed"
    if c.not_applicable:
        done += f", {c.not_applicable} not applicable"
    if c.resumed:
        done += f", {c.resumed} read back from an earlier run"
    varied = ", ".join(f"{a.name} ({len(a.values)})" for a in spec.axes if len(a.values) > 1)
    label = "tasks" if "task" in spec.axis_names else t.label
    return (" ".join([f"Sweep of {label}", *where]) + f"; {done}"
            + (f"; varied: {varied}" if varied else ""))


def host_note(result: SweepResult) -> str:
    """Which host model the simulated times used (docs/metrics.md section 9.4)."""
    host = result.spec.target.host
    what = ("calls issued from a C loop, as nccl-tests" if host == "nccl-tests" else
            "calls issued from Python through torch.distributed, as PKB's reference")
    return f"host model {host} ({what})"


def _shown_fields(result: SweepResult) -> list[str]:
    """The table's columns: error only when some point failed, not_applicable only when some
    point does not apply."""
    hidden = {name for name, count in (("error", result.counts.failed),
                                       (NOT_APPLICABLE, result.counts.not_applicable))
              if not count}
    return [name for name in fields(result) if name not in hidden]


def render_table(result: SweepResult) -> str:
    from rich import box
    from rich.table import Table

    names = _shown_fields(result)
    numeric = _numeric_fields(result)
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for name in names:
        table.add_column(name, justify="right" if name in numeric else "left",
                         overflow="fold")
    for row in result.rows:
        table.add_row(*(cell(n, row.get(n)) for n in names))
    text = to_text(table, width=max(100, 14 * len(names)),
                   keep=min(len(result.spec.axes), len(names) - 1))
    note = ("Times in us; bandwidths in GB/s (1e9 B/s, nccl-tests' algbw/busbw); sizes are "
            f"bytes per rank; {host_note(result)}")
    return heading(result) + "\n" + note + "\n\n" + text


def _numeric_fields(result: SweepResult) -> set[str]:
    """Right-aligned: metric columns but binding, and axes whose values are all numbers."""
    axes = {a.name for a in result.spec.axes if all(isinstance(v, int | float) for v in a.values)}
    return axes | (set(result.columns) - {"binding"})


def render_markdown(result: SweepResult) -> str:
    names = _shown_fields(result)
    numeric = _numeric_fields(result)
    lines = [f"{heading(result)}. Times in µs, bandwidths in GB/s; {host_note(result)}.", "",
             "| " + " | ".join(names) + " |",
             "|" + "|".join("---:" if n in numeric else "---" for n in names) + "|"]
    for row in result.rows:
        cells = (cell(n, row.get(n)).replace("|", "\\|") for n in names)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def render_html(result: SweepResult, png: bytes, provenance: Provenance,
                notes: Sequence[str] = ()) -> str:
    """One self-contained page (pkbsim.report.html_page): the plot (``png``, sweep_plot; none
    when empty), ``notes`` (e.g. the baseline's speedups) and every point in a table that sorts
    by raw values (sizes in bytes) and filters."""
    names = _shown_fields(result)
    rows = [[_html_cell(n, row.get(n)) for n in names] for row in result.rows]
    body = [page.paragraph(heading(result)),
            page.paragraph("Times in µs; bandwidths in GB/s (1e9 B/s, nccl-tests' algbw/busbw); "
                           f"sizes are bytes per rank; {host_note(result)}.", "note"),
            *(page.paragraph(n) for n in notes if n.strip())]
    if png:
        body.append(page.image(png, "sweep plot"))
    body.append(page.table(names, rows, "sweep points"))
    what = "tasks" if "task" in result.spec.axis_names else result.spec.target.label
    return page.page(f"pkbsim sweep: {what}", body, provenance)


def _html_cell(name: str, value: Any) -> page.CellLike:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return page.Cell(cell(name, value), float(value))
    return cell(name, value)
