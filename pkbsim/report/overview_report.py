"""``pkbsim analyze --all`` as a terminal table, CSV, Markdown, JSON (``pkbsim.overview/1``) or
one HTML page.

JSON and CSV fields are a stable contract: add, never rename or remove without a schema bump.
Times are microseconds (``_us``), sizes bytes.
"""

from __future__ import annotations

import csv
import io
from typing import Any

from pkbsim import __version__
from pkbsim.datafiles import display_path
from pkbsim.files import json_text
from pkbsim.overview import BINDINGS, Overview, OverviewRow
from pkbsim.report import html_page as page
from pkbsim.report.html_page import Provenance
from pkbsim.report.text import json_count, json_us, plain_table
from pkbsim.units import US, format_bytes, format_us

SCHEMA = "pkbsim.overview/1"
CSV_FIELDS = ("id", "name", "parallelism", "source", "preset", "world_size", "comm_ops",
              "buffer_bytes_per_rank", "moved_bytes_per_rank", "data_dependent", "host_syncs",
              "t_comm_us", "t_comm_line_rate_us", "t_mem_us", "t_comp_us", "t_latency_floor_us",
              "t_roof_us", "binding", "busiest_link", "error")


def row_dict(row: OverviewRow) -> dict[str, Any]:
    roof = row.roofline
    spec = row.spec
    out: dict[str, Any] = {
        "id": spec.id, "name": spec.name, "parallelism": spec.parallelism,
        "source": spec.source, "preset": row.preset, "world_size": row.world_size,
        "comm_ops": len(row.comm_ops),
        "buffer_bytes_per_rank": json_count(row.buffer_bytes_per_rank),
        "moved_bytes_per_rank": json_count(row.moved_bytes_per_rank),
        "data_dependent": row.data_dependent, "host_syncs": row.host_syncs,
    }
    terms = ("t_comm_us", "t_comm_line_rate_us", "t_mem_us", "t_comp_us", "t_latency_floor_us",
             "t_roof_us")
    if roof is None:
        out.update({k: None for k in terms})
        out.update(binding=None, busiest_link=None, error=row.error)
        return out
    values = (roof.t_comm_s, roof.t_comm_line_rate_s, roof.t_mem_s, roof.t_comp_s,
              roof.t_latency_floor_s, roof.t_roof_s)
    out.update({k: json_us(v) for k, v in zip(terms, values, strict=True)})
    out.update(binding=roof.binding, busiest_link=roof.busiest_link, error=None)
    return out


def _summary_dict(ov: Overview) -> dict[str, Any]:
    s = ov.summary()
    return {"analysed": s.analysed, "not_analysed": s.not_analysed, "bound_by": s.bound_by,
            "latency_bound": s.bound_by["latency"],
            "median_t_roof_us": json_us(s.median_t_roof_s),
            "median_moved_bytes_per_rank": json_count(s.median_moved_bytes)}


def to_dict(ov: Overview) -> dict[str, Any]:
    topo = ov.topology
    return {
        "schema": SCHEMA,
        "pkbsim_version": __version__,
        "topology": {"name": topo.name, "file": display_path(topo.file), "sha256": topo.sha256,
                     "gpu": topo.gpu.model, "gpus_per_node": topo.gpus_per_node,
                     "nodes": topo.nodes, "peer_line_rate_GBps": topo.peer_line_rate_GBps,
                     "in_switch_reduction": topo.scale_up.in_switch_reduction},
        "world_size": ov.world_size,
        "preset": ov.preset,
        "filters": [f"{k}={v}" for k, v in ov.filters],
        "sort": ov.sort, "reverse": ov.reverse,
        "topology_overrides": dict(ov.topology_overrides),
        "summary": _summary_dict(ov),
        "rows": [row_dict(r) for r in ov.rows],
        "task_sha256": {r.spec.key: r.spec.sha256 for r in ov.rows},
    }


def render_json(ov: Overview) -> str:
    return json_text(to_dict(ov), indent=2) + "\n"


def render_csv(ov: Overview) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    for row in ov.rows:
        writer.writerow({k: ("" if v is None else v) for k, v in row_dict(row).items()})
    return buffer.getvalue()


def _heading(ov: Overview) -> str:
    topo = ov.topology
    ws = f"W = {ov.world_size}" if ov.world_size else "each task's default W"
    preset = ("each task's production preset" if ov.preset == "production"
              else f"preset {ov.preset}")
    sets = " ".join(f"{k}={v}" for k, v in ov.topology_overrides.items())
    return (f"All tasks on {topo.name} ({topo.nodes} x {topo.gpus_per_node} x {topo.gpu.model}, "
            f"{topo.peer_line_rate_GBps:g} GB/s per GPU per direction), {ws}, {preset}"
            + (f", --set {sets}" if sets else ""))


def summary_lines(ov: Overview) -> list[str]:
    s = ov.summary()
    if not s.analysed:
        return [f"No task analysed ({s.not_analysed} not analysed)."]
    counts = ", ".join(f"{s.bound_by[b]} {b}" for b in BINDINGS)
    lines = [f"Summary: {s.analysed} tasks analysed; bound by: {counts}.",
             f"Latency-bound: {s.bound_by['latency']} of {s.analysed}. Median t_roof "
             f"{format_us(s.median_t_roof_s)} us; median bytes moved per rank "
             f"{format_bytes(s.median_moved_bytes)}."]
    if s.not_analysed:
        lines.append(f"Not analysed: {s.not_analysed}.")
    return lines


def render_table(ov: Overview) -> str:
    per_task_preset = ov.preset == "production"
    columns = ["id", "name", "parallelism", "W"] + (["preset"] if per_task_preset else []) + [
        "bytes/rank", "t_comm", "t_mem", "t_comp", "t_lat", "t_roof", "bound"]
    rows = []
    for row in ov.analysed:
        roof = row.roofline
        assert roof is not None
        cells = [str(row.spec.id), row.spec.name, row.spec.parallelism, str(row.world_size)]
        if per_task_preset:
            cells.append(row.preset)
        cells += [format_bytes(row.moved_bytes_per_rank), format_us(roof.t_comm_s),
                  format_us(roof.t_mem_s), format_us(roof.t_comp_s),
                  format_us(roof.t_latency_floor_s), format_us(roof.t_roof_s), roof.binding]
        rows.append(cells)
    head = _heading(ov) + "\nTimes in us; bytes/rank = bytes on the busiest GPU port, all comm ops"
    tail = summary_lines(ov)
    for row in ov.not_analysed:
        tail.append(f"  {row.spec.id} {row.spec.name}: {row.error}")
    table = plain_table(columns, rows, {"name", "parallelism", "preset", "bound"}, keep=2,
                        optional=("parallelism", "preset"))
    return head + "\n\n" + table + "\n" + "\n".join(tail) + "\n"


def render_markdown(ov: Overview) -> str:
    lines = [f"{_heading(ov)}. Times in µs.", "",
             "| id | name | source | parallelism | bytes moved/rank | t_comm | t_mem | t_comp | "
             "t_lat | t_roof | binding |",
             "|---:|---|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for row in ov.rows:
        spec = row.spec
        roof = row.roofline
        if roof is None:
            lines.append(f"| {spec.id} | {spec.name} | {spec.source} | {spec.parallelism} | "
                         f"| | | | | | not analysed: {row.error} |")
            continue
        lines.append(
            f"| {spec.id} | {spec.name} | {spec.source} | {spec.parallelism} | "
            f"{format_bytes(row.moved_bytes_per_rank)} | {format_us(roof.t_comm_s)} | "
            f"{format_us(roof.t_mem_s)} | {format_us(roof.t_comp_s)} | "
            f"{format_us(roof.t_latency_floor_s)} | {format_us(roof.t_roof_s)} | "
            f"{roof.binding} |")
    return "\n".join([*lines, "", *summary_lines(ov)]) + "\n"


def render_html(ov: Overview, png: bytes, provenance: Provenance) -> str:
    """One self-contained page (pkbsim.report.html_page): the summary, the overview plot
    (``png``), and every task in a table that sorts by raw values (bytes, us) and filters."""
    head = ["id", "name", "source", "parallelism", "W", "preset", "bytes moved/rank", "t_comm",
            "t_mem", "t_comp", "t_lat", "t_roof", "binding"]
    errors = bool(ov.not_analysed)
    rows = [_html_row(row) + ([row.error or "-"] if errors else []) for row in ov.rows]
    body = [page.paragraph(_heading(ov)),
            page.paragraph("Times in µs; bytes moved/rank = bytes on the busiest GPU port, all "
                           "comm ops.", "note"),
            *(page.paragraph(line) for line in summary_lines(ov)),
            page.image(png, "roofline time against bytes moved, every task"),
            page.table([*head, *(["not analysed"] if errors else [])], rows, "tasks")]
    return page.page(f"pkbsim analyze --all: {ov.topology.name}", body, provenance)


def _html_row(row: OverviewRow) -> list[page.CellLike]:
    spec = row.spec
    cells: list[page.CellLike] = [page.Cell(str(spec.id), spec.id), spec.name, spec.source,
                                  spec.parallelism, str(row.world_size or "-"), row.preset]
    roof = row.roofline
    if roof is None:
        return [*cells, *["-"] * 6, row.binding]
    times = (roof.t_comm_s, roof.t_mem_s, roof.t_comp_s, roof.t_latency_floor_s, roof.t_roof_s)
    return [*cells, page.Cell(format_bytes(row.moved_bytes_per_rank), row.moved_bytes_per_rank),
            *(page.Cell(format_us(t), t / US) for t in times), roof.binding]
