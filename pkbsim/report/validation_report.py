"""The model's error against a validation run, rendered: a table, Markdown, JSON
(``pkbsim.validation-report/1``) and the predicted-against-measured plot (deterministic bytes).

The report itself is built by pkbsim.validation.error_report; only the CLI writes these.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from rich.table import Table

from pkbsim import __version__
from pkbsim.datafiles import display_path
from pkbsim.files import json_text
from pkbsim.report.images import check_format, deterministic_figures, figure_bytes
from pkbsim.report.text import to_text
from pkbsim.topology.schema import Topology
from pkbsim.units import format_bytes
from pkbsim.validation.error_report import (
    REGIMES,
    TOPOLOGIES,
    Row,
    Summary,
    ValidationReport,
)
from pkbsim.validation.results import Measurement

SCHEMA = "pkbsim.validation-report/1"
# op family (plot markers and colours): the first prefix that matches
FAMILIES = (("d2d_", "HBM copy", "o", "#1f77b4"), ("launch_", "launch", "s", "#ff7f0e"),
            ("host_", "host dispatch", "D", "#2ca02c"), ("h2d_", "host copy", "^", "#d62728"),
            ("d2h_", "host copy", "^", "#d62728"), ("peer_", "peer", "v", "#9467bd"),
            ("nccl_", "NCCL", "P", "#8c564b"))
BAND = 0.10  # the plot's band around y = x


# ------------------------------------------------------------------ shared text

def _pct(x: float | None, sign: bool = False) -> str:
    if x is None:
        return "-"
    pct = round(x * 100, 1) + 0.0  # no "-0.0%"
    return f"{pct:+.1f}%" if sign else f"{pct:.1f}%"


def _us(x: float | None) -> str:
    return "-" if x is None else f"{x:.4g}"


def _params(m: Measurement) -> str:
    """The swept parameters (measured extras such as host_us or busbw_GBps left out)."""
    return " ".join(f"{k}={v}" for k, v in m.params.items()
                    if not k.endswith(("_us", "_GBps")) and v is not None)


def _size(m: Measurement) -> str:
    return format_bytes(m.size_bytes) if m.size_bytes else "-"


def _topo_line(report: ValidationReport) -> str:
    b, c = report.base, report.calibrated
    return f"base {b.name} ({_file(b)}), calibrated {c.name} ({_file(c)})"


def _file(topo: Topology) -> str:
    return display_path(topo.file) if topo.file else "in memory"


def _heading(report: ValidationReport) -> list[str]:
    env = report.results.environment
    gpu = f"{env.get('gpu_count', '?')} x {env.get('gpu_name', 'unknown GPU')}"
    return [f"Model error against {report.results.file or 'a validation run'} ({gpu}, "
            f"{env.get('date', 'undated')})",
            f"Topologies: {_topo_line(report)}",
            "error = (predicted - measured) / measured; medians of |error|; NCCL predicted "
            "without NVLS unless the run forced it (the runner keeps multicast off)"]


def _summary_cells(s: Summary) -> list[str]:
    counts = "/".join(str(s.n_by[w]) for w in TOPOLOGIES)
    return [counts, *(_pct(s.median_abs_error[w]) for w in TOPOLOGIES)]


def _not_modelled_lines(report: ValidationReport) -> list[str]:
    return [f"{nm.op} x {nm.count} ({' and '.join(nm.on)}): {nm.reason}"
            for nm in report.not_modelled]


# ------------------------------------------------------------------ renderers

def render_table(report: ValidationReport, measurements: bool = False) -> str:
    """Summaries per regime, op and case (and every measurement if asked), as text."""
    def summary_table(title: str, first: str, items: Iterable[Summary],
                      note: Callable[[str], str] | None = None) -> Table:
        t = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
        t.add_column(first)
        for col in ("n base/cal", "base", "calibrated"):
            t.add_column(col, justify="right")
        if note:
            t.add_column("")
        for s in items:
            t.add_row(s.key, *_summary_cells(s), *([note(s.key)] if note else []))
        return t

    status = {c.key: c.status for c in report.results.cases}
    parts: list[object] = [
        summary_table("Median |error| per regime", "regime",
                      [*report.by_regime, report.overall],
                      lambda k: REGIMES.get(k, "every modelled measurement")),
        "", summary_table("Median |error| per op", "op", report.by_op),
        "", summary_table("Median |error| per case", "case", report.by_case,
                          lambda k: status.get(k, "")),
    ]
    if measurements:
        t = Table(title="Every measurement (times in us)", title_justify="left",
                  show_edge=False, pad_edge=False)
        for col in ("case", "op", "size", "params", "measured", "base", "err", "calibrated",
                    "err"):
            t.add_column(col, justify="left" if col in ("case", "op", "params") else "right")
        for r in report.rows:
            t.add_row(*_row_cells(r))
        parts += ["", t]
    lines = _not_modelled_lines(report)
    tail = ["Not modelled:", *(f"  {line}" for line in lines)] if lines else []
    return "\n".join(_heading(report)) + "\n" + to_text(*parts) + "".join(
        f"{line}\n" for line in tail)


def _row_cells(r: Row) -> list[str]:
    return [r.case, r.m.op, _size(r.m), _params(r.m), _us(r.m.time_us),
            _us(r.predicted_us("base")), _pct(r.error("base"), sign=True),
            _us(r.predicted_us("calibrated")), _pct(r.error("calibrated"), sign=True)]


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 6)


def _summary_dict(s: Summary) -> dict[str, Any]:
    return {"key": s.key, "n": s.n, "n_predicted": dict(s.n_by),
            "median_abs_error": {w: _round(s.median_abs_error[w]) for w in TOPOLOGIES}}


def _topology_dict(topo: Topology) -> dict[str, Any]:
    return {"name": topo.name, "file": display_path(topo.file) if topo.file else None,
            "sha256": topo.sha256 or None}


def to_dict(report: ValidationReport) -> dict[str, Any]:
    res = report.results
    return {
        "schema": SCHEMA,
        "pkbsim_version": __version__,
        "environment": res.environment,
        "regimes": dict(REGIMES),
        "by_regime": [_summary_dict(s) for s in report.by_regime],
        "overall": _summary_dict(report.overall),
        "by_op": [_summary_dict(s) for s in report.by_op],
        "by_case": [{**_summary_dict(s), "status": next(
            (c.status for c in res.cases if c.key == s.key), None)} for s in report.by_case],
        "measurements": [{
            "case": r.case, "op": r.m.op, "size_bytes": r.m.size_bytes, "params": r.m.params,
            "regime": r.m.regime, "measured_us": r.m.time_us,
            "predicted_us": {w: _round(r.predicted_us(w)) for w in TOPOLOGIES},
            "error": {w: _round(r.error(w)) for w in TOPOLOGIES},
            "model": {w: (p.model if (p := getattr(r, w)) is not None else None)
                      for w in TOPOLOGIES},
        } for r in report.rows],
        "not_modelled": [{"op": nm.op, "count": nm.count, "reason": nm.reason,
                          "topologies": list(nm.on)} for nm in report.not_modelled],
        "provenance": {
            "pkbsim_version": __version__,
            "results_file": res.file or None,
            "results_sha256": report.results_sha256 or None,
            "base_topology": _topology_dict(report.base),
            "calibrated_topology": _topology_dict(report.calibrated),
        },
    }


def render_json(report: ValidationReport) -> str:
    return json_text(to_dict(report), indent=1) + "\n"


def render_markdown(report: ValidationReport) -> str:
    """For committing beside the run (docs/measurements/)."""
    head = _heading(report)
    lines = [f"# {head[0]}", "", *(f"{h}." for h in head[1:]), "",
             f"Results sha256 `{report.results_sha256 or '-'}`; pkbsim {__version__}.", ""]

    def table(title: str, first: str, items: Iterable[Summary], notes: list[str]) -> None:
        lines.extend([f"## {title}", "",
                      f"| {first} | n (base/calibrated) | base | calibrated |",
                      "|---|---:|---:|---:|"])
        lines.extend(f"| {s.key} | " + " | ".join(_summary_cells(s)) + " |" for s in items)
        lines.extend(["", *notes, *([""] if notes else [])])

    table("Median |error| per regime", "regime", [*report.by_regime, report.overall],
          [f"- {k}: {v}" for k, v in REGIMES.items()])
    table("Median |error| per op", "op", report.by_op, [])
    table("Median |error| per case", "case", report.by_case, [])
    lines.extend(["## Every measurement", "", "Times in µs.", "",
                  "| case | op | size | params | measured | base | error | calibrated | "
                  "error |", "|---|---|---:|---|---:|---:|---:|---:|---:|"])
    lines.extend("| " + " | ".join(_row_cells(r)) + " |" for r in report.rows)
    nm = _not_modelled_lines(report)
    if nm:
        lines.extend(["", "## Not modelled", "", *(f"- {line}" for line in nm)])
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ plot

def family(op: str) -> tuple[str, str, str]:
    """(family name, marker, colour) of an op."""
    for prefix, name, marker, colour in FAMILIES:
        if op.startswith(prefix):
            return name, marker, colour
    return "other", "X", "#7f7f7f"


def plot(report: ValidationReport, fmt: str = "png") -> bytes:
    """Predicted against measured time, log-log; the same report gives the same bytes."""
    check_format(fmt)
    with deterministic_figures():
        return _draw(report, fmt)


def _draw(report: ValidationReport, fmt: str) -> bytes:
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    fig, ax = plt.subplots(figsize=(8.5, 7.5), dpi=100)
    values = [v for r in report.rows
              for v in (r.m.time_us, r.predicted_us("base"), r.predicted_us("calibrated"))
              if v is not None]
    lo, hi = (min(values) / 2, max(values) * 2) if values else (0.1, 1e4)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.fill_between([lo, hi], [lo * (1 - BAND), hi * (1 - BAND)],
                    [lo * (1 + BAND), hi * (1 + BAND)], color="#dddddd", lw=0, zorder=1)
    ax.plot([lo, hi], [lo, hi], color="#555555", lw=1, zorder=2)
    handles: list[Any] = []
    names = sorted({family(r.m.op) for r in report.rows},
                   key=lambda f: [x[1] for x in FAMILIES].index(f[0])
                   if f[0] != "other" else len(FAMILIES))
    for name, marker, colour in names:
        rows = [r for r in report.rows if family(r.m.op)[0] == name]
        for which, face in (("base", "none"), ("calibrated", colour)):
            pts = [(r.m.time_us, t) for r in rows if (t := r.predicted_us(which)) is not None]
            if pts:
                xs, ys = zip(*pts, strict=True)
                ax.scatter(xs, ys, marker=marker, s=34, facecolors=face, edgecolors=colour,
                           linewidths=1.0, zorder=3)
        handles.append(Line2D([], [], ls="", marker=marker, color=colour,
                              label=f"{name} ({len(rows)})"))
    handles += [
        Line2D([], [], ls="", marker="o", markerfacecolor="none", color="#333333",
               label=f"base: {report.base.name}"),
        Line2D([], [], ls="", marker="o", color="#333333",
               label=f"calibrated: {report.calibrated.name}"),
        Line2D([], [], color="#555555", label="predicted = measured"),
        Line2D([], [], color="#dddddd", lw=8, label=f"±{BAND:.0%}"),
    ]
    ax.legend(handles=handles, loc="upper left", fontsize=8, framealpha=0.9)
    ax.grid(True, which="major", color="#eeeeee", lw=0.6)
    ax.set_xlabel("measured time (us)")
    ax.set_ylabel("predicted time (us)")
    env = report.results.environment
    ax.set_title(f"pkbsim against {env.get('gpu_count', '?')} x "
                 f"{env.get('gpu_name', 'unknown GPU')}: median |error| "
                 f"{_pct(report.overall.median_abs_error['base'])} base, "
                 f"{_pct(report.overall.median_abs_error['calibrated'])} calibrated",
                 fontsize=10)
    if not values:
        ax.text(0.5, 0.5, "no modelled measurements", ha="center", transform=ax.transAxes)
    fig.tight_layout()
    return figure_bytes(fig, fmt, 110)
