"""A simulation as a Gantt chart: host and stream rows per rank, then the busiest links.

Returns the image as bytes (png, svg or pdf); the same result gives the same bytes.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from pkbsim.report.images import check_format, deterministic_figures, figure_bytes
from pkbsim.report.trace import TRACKS, critical_nodes, node_lanes
from pkbsim.sim.result import LinkUse, SimResult, flow_links
from pkbsim.units import format_bytes

MAX_LINKS = 6
LAUNCH_COLOUR = "#9e9e9e"
LINK_COLOUR = "#4a5a6a"
_ORDER = [*range(0, 20, 2), *range(1, 20, 2)]  # tab20: ten distinct hues first, then light ones


def shown_ranks(result: SimResult) -> list[int]:
    """Every rank up to 8; otherwise the first two, the slowest and the last."""
    w = result.instance.world_size
    if w <= 8:
        return list(range(w))
    return sorted({0, 1, result.slowest_rank, w - 1})


def title(result: SimResult) -> str:
    inst = result.instance
    text = (f"{inst.spec.label} on {result.topology.name}, "
            f"W={inst.world_size}, {result.strategy.name}: predicted "
            f"{result.predicted_us:.3g} us per iteration (slowest rank {result.slowest_rank})")
    omitted = inst.world_size - len(shown_ranks(result))
    return text + (f"\n{omitted} of {inst.world_size} ranks not shown" if omitted else "")


def busy_links(result: SimResult) -> list[tuple[LinkUse, list[tuple[float, float]]]]:
    """The busiest links that carried recorded flows, with the intervals holding any flow."""
    spans: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for f, ids in zip(result.flows, flow_links(result), strict=True):
        for link in ids:
            spans[link].append((f.start_us, f.end_us))
    out: list[tuple[LinkUse, list[tuple[float, float]]]] = []
    for use in result.links:
        if use.id in spans and len(out) < MAX_LINKS:
            merged: list[tuple[float, float]] = []
            for a, b in sorted(spans[use.id]):
                if merged and a <= merged[-1][1]:
                    merged[-1] = (merged[-1][0], max(merged[-1][1], b))
                else:
                    merged.append((a, b))
            out.append((use, merged))
    return out


def gantt_chart(result: SimResult, fmt: str = "png",
                marks: tuple[tuple[str, float], ...] = ()) -> bytes:
    """The chart in ``fmt`` (png, svg or pdf). ``marks`` are (label, µs) durations drawn as
    vertical lines from the start of the measured iteration (e.g. a measured time, t_roof)."""
    check_format(fmt)
    with deterministic_figures():
        return figure_bytes(_draw(result, marks), fmt, 110)


def _colours(result: SimResult) -> dict[str, Any]:
    from matplotlib import colormaps

    cmap = colormaps["tab20"]
    names = sorted({n.name.split(":", 1)[0] for n in result.nodes if n.end_us > n.start_us})
    return {name: cmap(_ORDER[i % 20]) for i, name in enumerate(names)}


MARK_COLOURS = ("#d62728", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf")


def _draw(result: SimResult, marks: tuple[tuple[str, float], ...] = ()) -> Any:
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    ranks, links = shown_ranks(result), busy_links(result)
    rows = [f"r{r} {t}" for r in ranks for t in TRACKS]
    rows += [f"{u.id} ({format_bytes(u.wire_bytes)}, {u.utilization * 100:.2g}% busy)"
             for u, _ in links]
    colours = _colours(result)
    fig = Figure(figsize=(14 if len(colours) > 6 else 12, 1.8 + 0.36 * len(rows)),
                 layout="constrained")
    ax = fig.add_subplot()
    ax.axvspan(*result.window_us, color="#fff4cc", zorder=0)
    _draw_nodes(ax, result, ranks, colours)
    for y, (_use, spans) in enumerate(links, start=len(ranks) * len(TRACKS)):
        ax.broken_barh([(a, b - a) for a, b in spans], (y - 0.3, 0.6), color=LINK_COLOUR)
    slowest = result.slowest_rank
    for n in result.nodes:
        if n.rank == slowest and n.name == "iteration_end":
            ax.axvline(n.end_us, color="#333333", ls="--", lw=0.9, zorder=4)
    if links:
        ax.axhline(len(ranks) * len(TRACKS) - 0.5, color="#bbbbbb", lw=0.8)
    ax.set_yticks(range(len(rows)), rows, fontsize=8)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    start = result.window_us[0]
    for i, (_label, us) in enumerate(marks):
        ax.axvline(start + us, color=MARK_COLOURS[i % len(MARK_COLOURS)], ls=":", lw=1.4,
                   zorder=5)
    right = max([result.makespan_us, *(start + us for _, us in marks)])
    ax.set_xlim(0, max(right, 1e-3) * 1.01)
    ax.set_xlabel("time since simulation start (µs)")
    ax.grid(True, axis="x", color="#eeeeee", lw=0.6)
    ax.set_axisbelow(True)
    ax.set_title(title(result), fontsize=10)
    handles: list[Any] = [Patch(facecolor=c, label=name) for name, c in colours.items()]
    if any(n.name.endswith(":sync") for n in result.nodes):
        handles.append(Patch(facecolor="white", edgecolor="#555555", hatch="///",
                             label="host sync (op colour)"))
    handles += [Patch(facecolor=LAUNCH_COLOUR, label="launch (ready → start)"),
                Patch(facecolor="white", edgecolor="black", lw=1.2, label="critical path"),
                Line2D([], [], color="#333333", ls="--", lw=0.9,
                       label=f"iteration end (rank {slowest})"),
                Patch(facecolor="#fff4cc", label="measured iteration")]
    handles += [Line2D([], [], color=MARK_COLOURS[i % len(MARK_COLOURS)], ls=":", lw=1.4,
                       label=f"{label}: {us:.3g} µs from its start")
                for i, (label, us) in enumerate(marks)]
    if links:
        handles.append(Patch(facecolor=LINK_COLOUR, label="link carries a flow"))
    if len(colours) > 6:
        fig.legend(handles=handles, loc="outside right upper", fontsize=8)
    else:
        fig.legend(handles=handles, loc="outside lower center", fontsize=8,
                   ncols=min(len(handles), 6))
    return fig


def _draw_nodes(ax: Any, result: SimResult, ranks: list[int], colours: dict[str, Any]) -> None:
    """Bars (grouped by style, one barh call each) and launch gaps of the shown ranks."""
    crit, lane_of = critical_nodes(result), node_lanes(result.nodes)
    row = {(r, t): j * len(TRACKS) + k for j, r in enumerate(ranks) for k, t in enumerate(TRACKS)}
    count: dict[tuple[int, str], int] = defaultdict(lambda: 1)
    for i, lane in lane_of.items():
        key = (result.nodes[i].rank, result.nodes[i].track)
        count[key] = max(count[key], lane + 1)
    bars: dict[tuple[str, bool, bool], list[tuple[float, float, float, float]]] = defaultdict(list)
    gaps: dict[bool, list[tuple[float, float, float, float]]] = defaultdict(list)
    for i, n in enumerate(result.nodes):
        y0 = row.get((n.rank, n.track))
        if y0 is None or n.end_us <= n.ready_us:
            continue
        h = 0.8 / count[(n.rank, n.track)]
        y = y0 - 0.4 + h * (lane_of[i] + 0.5)
        if n.start_us > n.ready_us:
            gaps[crit[i]].append((y, n.start_us - n.ready_us, n.ready_us, h * 0.3))
        if n.end_us > n.start_us:
            style = (n.name.split(":", 1)[0], n.name.endswith(":sync"), crit[i])
            bars[style].append((y, n.end_us - n.start_us, n.start_us, h * 0.9))
    for (name, sync, critical), items in sorted(bars.items()):
        ys, ws, lefts, hs = zip(*items, strict=True)
        ax.barh(ys, ws, left=lefts, height=hs, color=colours[name], hatch="///" if sync else None,
                edgecolor="black" if critical else "white", lw=1.2 if critical else 0.3,
                zorder=3 if critical else 2)
    for critical, items in sorted(gaps.items()):
        ys, ws, lefts, hs = zip(*items, strict=True)
        ax.barh(ys, ws, left=lefts, height=hs, color=LAUNCH_COLOUR,
                edgecolor="black" if critical else "none", lw=0.8, zorder=2)
