"""The sweep plot: one or more columns of the results against one axis, a line per series.

A series is one combination of the other varied axes. Sizes, and axes spanning more than two
decades, go on log axes; a busbw column gets each series' line-rate ceiling, dashed. Points
that failed are left out. Returns the image as bytes; the CLI decides where it goes.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from pkbsim.errors import UsageError
from pkbsim.planning.sweep import NOT_APPLICABLE, SweepResult, SweepSpec
from pkbsim.report.images import deterministic_figures, figure_bytes
from pkbsim.report.sweep_report import cell

LINE_RATE = "line_rate_busbw_GBps"
DECADES_FOR_LOG = 2.0
MARKERS = ("o", "x", "^", "s")
STYLES = ("-", "-.", ":", (0, (6, 2, 1, 2)))  # one per column when several series share colours


def numeric_axes(spec: SweepSpec) -> list[str]:
    """Varied axes whose values are all numbers, in axis order."""
    return [a.name for a in spec.axes if len(a.values) > 1
            and all(isinstance(v, int | float) for v in a.values)]


def default_x(spec: SweepSpec) -> str:
    """``size`` when it varies, else the first varied numeric axis, else the first varied one."""
    numeric = numeric_axes(spec)
    if "size" in numeric:
        return "size"
    if numeric:
        return numeric[0]
    varied = [a.name for a in spec.axes if len(a.values) > 1]
    if not varied:
        raise UsageError("--plot: nothing varies; vary an axis (--vary, --sizes)")
    return varied[0]


def default_y(columns: Sequence[str]) -> str:
    """The first numeric metric column."""
    for name in columns:
        if name != "binding":
            return name
    raise UsageError("--plot: no numeric metric; add one with --metric (e.g. t_roof)")


def plottable(spec: SweepSpec, columns: Sequence[str]) -> bool:
    """Whether the default --x and --y exist: something varies and a metric is numeric."""
    try:
        default_x(spec)
        default_y(columns)
    except UsageError:
        return False
    return True


def check_choice(spec: SweepSpec, columns: Sequence[str], x: str, y: str) -> None:
    """--x must be an axis, --y numeric columns, comma-separated (checked before any work)."""
    names = spec.axis_names
    if x not in names:
        raise UsageError(f"--x {x}: not an axis of this sweep (axes: {', '.join(names)})")
    numeric = [c for c in columns if c != "binding"]
    for one in y.split(","):
        if one not in numeric:
            raise UsageError(f"--y {one}: not a numeric column of this sweep (columns: "
                             + ", ".join(numeric) + ")")


def _log_scale(values: Sequence[float]) -> bool:
    positive = [v for v in values if v > 0]
    return len(positive) == len(values) and bool(positive) and \
        max(positive) / min(positive) > 10**DECADES_FOR_LOG


def _series(result: SweepResult, x: str) -> dict[str, list[dict[str, Any]]]:
    """Rows grouped by the values of the other varied axes, labelled ``name=value, ...``."""
    others = [a.name for a in result.spec.axes if len(a.values) > 1 and a.name != x]
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in result.rows:
        label = ", ".join(f"{n}={cell(n, row[n])}" for n in others)
        groups.setdefault(label, []).append(row)
    return groups


def sweep_plot(result: SweepResult, x: str, y: str, fmt: str = "png") -> bytes:
    """The same input gives the same bytes."""
    check_choice(result.spec, result.columns, x, y)
    with deterministic_figures():
        return _draw(result, x, y, fmt)


def _draw(result: SweepResult, x: str, y: str, fmt: str) -> bytes:
    import matplotlib.pyplot as plt

    axis = next(a for a in result.spec.axes if a.name == x)
    categorical = not all(isinstance(v, int | float) for v in axis.values)
    position = {v: i for i, v in enumerate(axis.values)}
    fig, ax = plt.subplots(figsize=(9, 5.5), dpi=100)
    xs_all: list[float] = []
    ys_all: list[float] = []
    groups = _series(result, x)
    cols = y.split(",")
    ceiling = any(c.endswith("busbw_GBps") and c != LINE_RATE for c in cols) and \
        LINE_RATE in result.columns
    for (ci, col), (index, (label, rows)) in itertools.product(enumerate(cols),
                                                                enumerate(groups.items())):
        done = [r for r in rows
                if r.get("error") is None and isinstance(r.get(col), int | float)]
        xs = [float(position[r[x]]) if categorical else float(r[x]) for r in done]
        ys = [float(r[col]) for r in done]
        colour = f"C{(index if len(groups) > 1 else ci) % 10}"
        style = STYLES[ci % len(STYLES)] if len(groups) > 1 else "-"
        name = ", ".join(p for p in (label, col if len(cols) > 1 else "") if p) or col
        if x == "task":  # separate problems: points, not a line through them
            ax.plot(xs, ys, marker=MARKERS[ci % len(MARKERS)], ms=4.5, ls="none", color=colour,
                    label=name)
        else:
            ax.plot(xs, ys, marker="o", ms=3.5, lw=1.4, color=colour, ls=style, label=name)
        xs_all += xs
        ys_all += ys
        if ceiling and ci == 0:
            rates = [(px, float(r[LINE_RATE])) for px, r in zip(xs, done, strict=True)
                     if isinstance(r.get(LINE_RATE), int | float)]
            if rates:
                ax.plot([p for p, _ in rates], [v for _, v in rates], ls="--", lw=1.1,
                        color=colour, label="line rate" + (f" ({label})" if label else ""))
                ys_all += [v for _, v in rates]
    if categorical:
        ax.set_xticks(range(len(axis.values)), [str(v) for v in axis.values])
    elif x == "size" or _log_scale(xs_all):
        ax.set_xscale("log", base=2 if x == "size" else 10)
    if x == "size":
        ticks = sorted(set(xs_all))
        step = max(1, len(ticks) // 10)
        ax.set_xticks(ticks[::step], [cell("size", int(t)) for t in ticks[::step]])
    if ys_all and _log_scale(ys_all):
        ax.set_yscale("log")
    ax.set_xlabel("size (bytes per rank)" if x == "size" else x)
    ax.set_ylabel("time (µs)" if all(c.endswith("_us") for c in cols) else ", ".join(cols))
    t = result.spec.target
    on = "" if "topology" in result.spec.axis_names else f" on {t.topology}"
    what = "tasks" if "task" in result.spec.axis_names else t.label
    ax.set_title(f"{what}{on}: {', '.join(cols)}", fontsize=11)
    ax.grid(True, which="major", color="#eeeeee", lw=0.6)
    if len(groups) > 1 or len(cols) > 1 or ceiling:
        ax.legend(fontsize=8, framealpha=0.9)
    failed = sum(1 for r in result.rows if r.get("error") is not None)
    skipped = sum(1 for r in result.rows if r.get(NOT_APPLICABLE) is not None)
    if failed or skipped:
        counts = [f"{failed} point(s) failed"] if failed else []
        counts += [f"{skipped} not applicable"] if skipped else []
        ax.text(0.99, 0.01, ", ".join(counts) + ", not drawn", ha="right", va="bottom",
                transform=ax.transAxes, fontsize=8, color="#666666")
    fig.tight_layout()
    return figure_bytes(fig, fmt, 130)
