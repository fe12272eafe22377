"""``pkbsim compare`` rendered: a terminal table, Markdown, HTML with the plot embedded, JSON
(schema ``pkbsim.compare/1``), the attainment and gap-cause plot, and the reference's timeline
with the measured times marked. The comparison itself is pkbsim.comparator.comparison's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from rich.table import Table

from pkbsim import __version__
from pkbsim.comparator.comparison import (
    Comparison,
    DirectoryComparison,
    MechanismSummary,
    VariantResult,
)
from pkbsim.comparator.gap import TERMS
from pkbsim.comparator.timelines import TimelineComparison
from pkbsim.files import json_text
from pkbsim.report import html_page as page
from pkbsim.report.html_page import Provenance
from pkbsim.report.images import figure_bytes
from pkbsim.report.text import markdown_table, to_text
from pkbsim.sim.result import SimResult

SCHEMA = "pkbsim.compare/1"
TERM_COLOURS = {"roofline": "#4c72b0", "launch_sync_latency": "#dd8452",
                "mechanism_inefficiency": "#55a868", "excess_bytes": "#c44e52",
                "missing_overlap": "#8172b3", "host_sync": "#937860",
                "unfused_pytorch": "#da8bc3", "residual": "#bbbbbb"}


# ---------------------------------------------------------------- JSON

def to_dict(c: Comparison) -> dict[str, Any]:
    return {
        "problem": c.problem, "topology": c.topology, "world_size": c.world_size,
        "t_roof_us": c.t_roof_us, "binding": c.binding,
        "predicted": {"nccl_reference_us": c.predicted_nccl_reference_us,
                      "custom_best_us": c.predicted_custom_best_us},
        "reference_model": {"source": c.reference_model.source,
                            "label": c.reference_model.label},
        "variants": [_variant_dict(v) for v in c.variants],
        "timelines": [_timeline_dict(t) for t in c.timelines],
    }


def _timeline_dict(t: TimelineComparison) -> dict[str, Any]:
    m = t.measured
    return {
        "variant": t.variant, "files": list(t.files), "calls_found_by": t.how_calls,
        "calls": t.calls, "ranks": t.ranks, "slowest_rank": t.slowest_rank,
        "measured_call_us": m.total_us, "call_min_us": t.call_min_us,
        "call_max_us": t.call_max_us, "cuda_event_call_us": t.event_mean_us,
        "sum_error": t.sum_error, "communication_us": m.comm_us,
        "overlapped_communication_us": m.overlapped_comm_us,
        "host_launch_by_operator_us": m.host_ops,
        "timed_us": t.timed_us, "profiler_slowdown": t.profiler_slowdown,
        "host_launch_without_profiler_us": t.host_without_profiler_us,
        "model": t.model_label,
        "model_call_us": t.model.total_us if t.model is not None else None,
        "terms": [dataclasses.asdict(r) for r in t.rows],
    }


def _variant_dict(v: VariantResult) -> dict[str, Any]:
    g = v.gap
    return {
        "variant": v.variant, "reference": v.is_reference, "measured_us": v.measured_us,
        "attainment": v.attainment, "speedup_vs_reference": v.speedup_vs_reference,
        "solution": v.solution,
        "mechanisms": list(v.mechanisms) if v.mechanisms is not None else None,
        "gap_us": g.gap_us, "modeled_us": g.modeled_us, "scale": g.scale,
        "predicted_candidate_us": g.predicted_candidate_us,
        "causes": [dataclasses.asdict(t) for t in g.terms],
        "notes": list(g.notes),
    }


def result_dict(result: DirectoryComparison) -> dict[str, Any]:
    """The whole document of ``--format json``."""
    return {
        "schema": SCHEMA, "pkbsim_version": __version__, "source": result.source,
        "topology": result.topology,
        "problems": [to_dict(c) for c in result.comparisons],
        "errors": [dataclasses.asdict(e) for e in result.errors],
        "summary": [dataclasses.asdict(s) for s in result.summary],
    }


def render_json(result: DirectoryComparison) -> str:
    return json_text(result_dict(result), indent=1) + "\n"


# ---------------------------------------------------------------- tables (shared cells)

_PROBLEM_HEAD = ("problem", "ranks", "t_roof us", "binding", "pred nccl_ref us",
                 "pred custom_best us")
_OVERVIEW_HEAD = ("problem", "variant", "measured us", "attainment", "speedup vs ref",
                  "top cause")
_CAUSE_HEAD = ("#", "cause", "us", "share", "evidence", "fix", "pred after fix us")
_SUMMARY_HEAD = ("mechanism", "variants", "median attainment")
_TIMELINE_HEAD = ("term", "measured us", "share", "model us", "model - measured us")


def _us(x: float | None) -> str:
    if x is not None and abs(x) < 5e-4:  # rounding of a zero (e.g. a residual of 1e-15 us)
        x = 0.0
    return "-" if x is None else f"{x:,.1f}" if abs(x) >= 100 else f"{x:.3g}"


def _problem_rows(comparisons: Sequence[Comparison]) -> list[list[str]]:
    return [[c.problem, str(c.world_size), _us(c.t_roof_us), c.binding,
             _us(c.predicted_nccl_reference_us), _us(c.predicted_custom_best_us)]
            for c in comparisons]


def _overview_rows(comparisons: Sequence[Comparison]) -> list[list[str]]:
    rows = []
    for c in comparisons:
        for v in c.variants:
            top = max(v.gap.terms, key=lambda t: t.time_us)
            cause = f"{top.name} ({_us(top.time_us)} us)" if top.time_us > 0 else "-"
            rows.append([c.problem, v.variant, _us(v.measured_us), f"{v.attainment:.1%}",
                         "-" if v.speedup_vs_reference is None
                         else f"{v.speedup_vs_reference:.2f}x", cause])
    return rows


def _cause_rows(v: VariantResult) -> list[list[str]]:
    """The named causes that take time, by size, then the residual (JSON keeps every term)."""
    shown = [t for t in v.gap.terms if t.time_us > 0 or t.name == "residual"]
    return [[str(i), t.name, _us(t.time_us), "-" if t.share is None else f"{t.share:.0%}",
             t.evidence, t.fix or "-", _us(t.predicted_after_fix_us)]
            for i, t in enumerate(shown, 1)]


def _reference_lines(comparisons: Sequence[Comparison]) -> list[str]:
    """Which model of PKB's reference each problem's nccl_reference times (the prediction, the
    reference's causes, every what-if from it) ran."""
    return [f"reference model of {c.problem}: {c.reference_model.label}" for c in comparisons]


def _summary_rows(summary: Sequence[MechanismSummary]) -> list[list[str]]:
    return [[s.mechanism, str(s.variants), f"{s.median_attainment:.1%}"] for s in summary]


def _variant_title(c: Comparison, v: VariantResult) -> str:
    how = (f"reference_inspection: {c.reference_model.label}" if v.is_reference else
           f"inspected {v.solution}" if v.solution else "no solution file: no inspection")
    return (f"{c.problem} / {v.variant}: measured {_us(v.measured_us)} us - t_roof "
            f"{_us(c.t_roof_us)} us = gap {_us(v.gap.gap_us)} us ({how})")


def _timeline_title(c: Comparison, t: TimelineComparison) -> str:
    return (f"{c.problem} / {t.variant}: where the measured time went (trace: {t.calls} calls "
            f"by {t.how_calls}, rank {t.slowest_rank} of {t.ranks}) beside {t.model_label}")


def _timeline_rows(t: TimelineComparison) -> list[list[str]]:
    rows = [[r.title, _us(r.measured_us), f"{r.share:.0%}", _us(r.model_us), _us(r.diff_us)]
            for r in t.rows]
    model = t.model.total_us if t.model is not None else None
    rows.append(["call (sum of the terms)", _us(t.measured.total_us), "100%", _us(model),
                 _us(None if model is None else model - t.measured.total_us)])
    return rows


def _timeline_notes(t: TimelineComparison) -> list[str]:
    m = t.measured
    notes = [f"calls {_us(t.call_min_us)}-{_us(t.call_max_us)} us"]
    if t.event_mean_us:
        notes.append(f"the same calls by CUDA events: {_us(t.event_mean_us)} us (the terms' "
                     f"sum is {t.sum_error:+.1%} of it)")
    if m.comm_us > 0:
        notes.append(f"communication {_us(m.comm_us)} us, of which {_us(m.overlapped_comm_us)} "
                     "us hidden behind kernels")
    slow = t.profiler_slowdown
    if slow is not None and slow > 1.05:
        notes.append(f"the profiler slowed these calls {slow:.2f}x (measured without it: "
                     f"{_us(t.timed_us)} us): kernel and copy times are the GPU's own, the host "
                     f"term carries the profiler's work; host without it, estimated: "
                     f"{_us(t.host_without_profiler_us)} us")
    top = [f"{name} {_us(us)}" for name, us in list(m.host_ops.items())[:4] if us > 0]
    if top:
        notes.append("host time by operator (us): " + ", ".join(top))
    return notes


def _head(result: DirectoryComparison) -> str:
    return (f"Measured against the roofline on {result.topology} ({result.source}); "
            "attainment = t_roof / measured; (pred) = pkbsim simulate")


# ---------------------------------------------------------------- terminal table

def render_table(result: DirectoryComparison) -> str:

    parts: list[object] = [_head(result), ""]
    parts.append(_rich("Per problem (roofline and simulator)", _PROBLEM_HEAD,
                       _problem_rows(result.comparisons)))
    parts += [f"  {line}" for line in _reference_lines(result.comparisons)]
    parts += ["", _rich("Per variant (measured)", _OVERVIEW_HEAD,
                        _overview_rows(result.comparisons))]
    for c in result.comparisons:
        for v in c.variants:
            parts += ["", _rich(_variant_title(c, v), _CAUSE_HEAD, _cause_rows(v))]
            parts += [f"  note: {n}" for n in v.gap.notes]
        for t in c.timelines:
            parts += ["", _rich(_timeline_title(c, t), _TIMELINE_HEAD, _timeline_rows(t))]
            parts += [f"  {n}" for n in _timeline_notes(t)]
    if len(result.comparisons) > 1 or result.errors:
        parts += ["", _rich("Median attainment per mechanism", _SUMMARY_HEAD,
                            _summary_rows(result.summary))]
    parts += [f"error: {e.problem}: {e.error}" for e in result.errors]
    return to_text(*parts)


def _rich(title: str, head: Sequence[str], rows: list[list[str]]) -> Table:
    table = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
    for name in head:
        numeric = name.endswith(("us", "attainment", "ref", "share", "variants", "ranks"))
        table.add_column(name, justify="right" if numeric else "left", overflow="fold",
                         min_width=len(name) if numeric else None)
    for row in rows:
        table.add_row(*row)
    return table


# ---------------------------------------------------------------- Markdown

def render_markdown(result: DirectoryComparison) -> str:
    lines = [f"# pkbsim compare: {result.topology}", "", _head(result) + ".", "",
             "## Per problem (roofline and simulator)", ""]
    lines += markdown_table(_PROBLEM_HEAD, _problem_rows(result.comparisons))
    lines += [""] + [f"- {line}" for line in _reference_lines(result.comparisons)]
    lines += ["", "## Per variant (measured)", ""]
    lines += markdown_table(_OVERVIEW_HEAD, _overview_rows(result.comparisons))
    for c in result.comparisons:
        for v in c.variants:
            lines += ["", f"### {_variant_title(c, v)}", ""]
            lines += markdown_table(_CAUSE_HEAD, _cause_rows(v))
            lines += [""] + [f"- note: {n}" for n in v.gap.notes] if v.gap.notes else []
        for t in c.timelines:
            lines += ["", f"### {_timeline_title(c, t)}", ""]
            lines += markdown_table(_TIMELINE_HEAD, _timeline_rows(t))
            lines += [""] + [f"- {n}" for n in _timeline_notes(t)]
    lines += ["", "## Median attainment per mechanism", ""]
    lines += markdown_table(_SUMMARY_HEAD, _summary_rows(result.summary))
    if result.errors:
        lines += ["", "## Not compared", ""] + [f"- {e.problem}: {e.error}"
                                                for e in result.errors]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- HTML

def render_html(result: DirectoryComparison, png: bytes, provenance: Provenance) -> str:
    """One self-contained page (pkbsim.report.html_page): the tables, sortable and filterable,
    ``png`` (comparison_plot) embedded, and the provenance."""
    body = [page.paragraph(_head(result)),
            page.heading("Per problem (roofline and simulator)"),
            page.table(_PROBLEM_HEAD, _problem_rows(result.comparisons), "per problem"),
            *(page.paragraph(line, "note") for line in _reference_lines(result.comparisons)),
            page.heading("Per variant (measured)"),
            page.table(_OVERVIEW_HEAD, _overview_rows(result.comparisons), "per variant"),
            page.image(png, "attainment and gap causes")]
    for c in result.comparisons:
        for v in c.variants:
            body += [page.heading(_variant_title(c, v), 3),
                     page.table(_CAUSE_HEAD, _cause_rows(v), f"{c.problem} / {v.variant}")]
            body += [page.paragraph(f"note: {n}", "note") for n in v.gap.notes]
        for t in c.timelines:
            body += [page.heading(_timeline_title(c, t), 3),
                     page.table(_TIMELINE_HEAD, _timeline_rows(t),
                                f"{c.problem} / {t.variant} timeline")]
            body += [page.paragraph(n, "note") for n in _timeline_notes(t)]
    body += [page.heading("Median attainment per mechanism"),
             page.table(_SUMMARY_HEAD, _summary_rows(result.summary), "per mechanism")]
    if result.errors:
        body += [page.heading("Not compared"),
                 page.table(("problem", "error"), [[e.problem, e.error] for e in result.errors],
                            "not compared")]
    return page.page(f"pkbsim compare: {result.topology}", body, provenance)


# ---------------------------------------------------------------- plots

def comparison_plot(result: DirectoryComparison) -> bytes:
    """Two panels as PNG: attainment per problem and variant (bars), and each variant's
    measured time split into roofline, causes and residual (stacked, fractions of measured).
    The same input gives the same bytes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bars = [(c, v) for c in result.comparisons for v in c.variants]
    labels = [f"{c.problem.split('_', 1)[0]}:{v.variant}" for c, v in bars]
    xs = list(range(len(bars)))
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(max(6.0, 0.7 * len(bars) + 2), 8),
                                      dpi=100)
    top.bar(xs, [v.attainment * 100 for _, v in bars],
            color=["#999999" if v.is_reference else TERM_COLOURS["roofline"] for _, v in bars])
    top.set_ylabel("attainment: t_roof / measured (%)")
    top.set_title(f"Attainment per problem on {result.topology} (grey: PKB's reference)",
                  fontsize=11)
    base = [0.0] * len(bars)
    for name in ("roofline", *TERMS):
        heights = [_fraction(v, name) for _, v in bars]
        if any(h > 0 for h in heights):
            bottom.bar(xs, heights, bottom=base, color=TERM_COLOURS[name], label=name)
            base = [b + h for b, h in zip(base, heights, strict=True)]
    bottom.set_ylabel("fraction of measured time")
    bottom.set_title("Where the measured time goes", fontsize=11)
    bottom.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    for ax in (top, bottom):
        ax.set_xticks(xs)
        ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
        ax.grid(True, axis="y", color="#eeeeee", lw=0.6)
    fig.tight_layout()
    return figure_bytes(fig, "png", 100)


def _fraction(v: VariantResult, name: str) -> float:
    """A bar segment: t_roof or a cause as a fraction of measured (a negative residual: 0)."""
    if name == "roofline":
        return min(v.attainment, 1.0)
    return max(v.gap.term(name).time_us, 0.0) / v.measured_us


def timeline_chart(comp: Comparison, sim: SimResult) -> bytes:
    """The simulated reference (``sim``, pkbsim.comparator.comparison.reference_timeline) with
    t_roof and each measured variant's time marked from the start of the steady iteration."""
    from pkbsim.report.gantt import gantt_chart

    marks = (("t_roof", comp.t_roof_us),
             *((f"measured {v.variant}", v.measured_us) for v in comp.variants))
    return gantt_chart(sim, "png", marks)
