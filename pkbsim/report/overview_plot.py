"""The overview plot: every task by bytes moved per rank against t_roof, coloured by binding.

Returns the image as bytes; the CLI decides where it goes.
"""

from __future__ import annotations

from collections.abc import Sequence

from pkbsim.overview import BINDINGS, Overview, OverviewRow
from pkbsim.report.images import deterministic_figures, figure_bytes
from pkbsim.units import US

COLOURS = {"comm": "#1f77b4", "memory": "#2ca02c", "compute": "#d62728", "latency": "#ff7f0e"}
_OFFSETS = ((4, 3), (4, -10), (-6, 5), (-6, -12), (7, -4), (-8, -4), (0, 9), (0, -15),
            (10, 8), (10, -16), (-12, 10), (-12, -18))


def _points(rows: Sequence[OverviewRow]) -> tuple[list[float], list[float]]:
    """Bytes moved (at least 1 B, for the log axis) and t_roof in us of analysed rows."""
    done = [r for r in rows if r.roofline is not None]
    return ([max(r.moved_bytes_per_rank, 1.0) for r in done],
            [r.roofline.t_roof_s / US for r in done if r.roofline is not None])


def _panel_title(ov: Overview) -> str:
    ws = f"W = {ov.world_size}" if ov.world_size else "default W"
    preset = "production presets" if ov.preset == "production" else f"preset {ov.preset}"
    return f"{ov.topology.name}, {ws}, {preset}"


def _place_labels(ax: object, xs: Sequence[float], ys: Sequence[float],
                  texts: Sequence[str], fontsize: float) -> None:
    """Greedy placement: each label at the first offset that overlaps no earlier label."""
    fig = ax.figure  # type: ignore[attr-defined]
    fig.canvas.draw()
    to_px = ax.transData.transform  # type: ignore[attr-defined]
    height = fontsize * fig.dpi / 72
    placed: list[tuple[float, float, float, float]] = []
    points = [tuple(to_px((x, y))) for x, y in zip(xs, ys, strict=True)]
    radius = 3.0
    for (px, py), text, x, y in sorted(zip(points, texts, xs, ys, strict=True),
                                       key=lambda item: (-item[0][1], item[0][0])):
        width = 0.6 * height * len(text)
        best, best_overlap = _OFFSETS[0], float("inf")
        for dx, dy in _OFFSETS:
            left = px + dx - (width if dx < 0 else 0)
            box = (left, py + dy, left + width, py + dy + height)
            overlap = sum(_overlap(box, other) for other in placed)
            overlap += sum(_overlap(box, (qx - radius, qy - radius, qx + radius, qy + radius))
                           for qx, qy in points)
            if overlap < best_overlap:
                best, best_overlap = (dx, dy), overlap
            if overlap == 0:
                break
        dx, dy = best
        left = px + dx - (width if dx < 0 else 0)
        placed.append((left, py + dy, left + width, py + dy + height))
        ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset pixels",  # type: ignore[attr-defined]
                    fontsize=fontsize, ha="right" if dx < 0 else "left", va="bottom",
                    color="#333333")


def _overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]
             ) -> float:
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    return w * h if w > 0 and h > 0 else 0.0


def overview_plot(panels: Sequence[Overview], fmt: str = "png") -> bytes:
    """One panel per overview, sharing log axes; the same input gives the same bytes."""
    with deterministic_figures():
        return _draw(panels, fmt)


def _draw(panels: Sequence[Overview], fmt: str) -> bytes:
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(11 * len(panels), 7.5), sharex=True,
                             sharey=True, squeeze=False, dpi=100)
    all_x, all_y = _points([r for ov in panels for r in ov.analysed])
    if not all_x:
        all_x, all_y = [1.0, 1e9], [1.0, 1e4]
    x_lo, x_hi = min(all_x) / 3, max(all_x) * 3
    y_lo, y_hi = min(all_y) / 2, max(all_y) * 3
    for ax, ov in zip(axes[0], panels, strict=True):
        topo = ov.topology
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(x_lo, x_hi)
        ax.set_ylim(y_lo, y_hi)
        rate = topo.peer_line_rate_GBps * 1e9
        ax.plot([x_lo, x_hi], [x_lo / rate / US, x_hi / rate / US], color="#555555", lw=1.2,
                ls="--", label=f"link line rate: bytes / {topo.peer_line_rate_GBps:g} GB/s")
        floor_us = topo.latency.kernel_launch_us + topo.scale_up.signal_latency_us
        ax.axhline(floor_us, color="#999999", lw=1.2, ls=":",
                   label=f"latency floor: 1 launch + 1 sync step = {floor_us:.2g} us")
        for binding in BINDINGS:
            rows = [r for r in ov.analysed if r.binding == binding]
            if not rows:
                continue
            ax.scatter(*_points(rows), s=28, color=COLOURS[binding], edgecolor="white",
                       linewidth=0.5, label=f"{binding}-bound ({len(rows)})", zorder=3)
        ax.set_title(_panel_title(ov), fontsize=11)
        ax.set_xlabel("bytes moved per rank (busiest GPU port, all comm ops)")
        ax.grid(True, which="major", color="#eeeeee", lw=0.6)
        ax.legend(loc="upper left", fontsize=8, framealpha=0.9)
        skipped = len(ov.not_analysed)
        if skipped:
            ax.text(0.99, 0.01, f"{skipped} task(s) not analysed at this size", ha="right",
                    va="bottom", transform=ax.transAxes, fontsize=8, color="#666666")
    axes[0][0].set_ylabel("t_roof (us): the largest of comm, memory, compute, latency floor")
    fig.suptitle("ParallelKernelBench tasks: roofline time against bytes moved "
                 "(labels are PKB problem ids)", fontsize=12)
    fig.tight_layout()
    for ax, ov in zip(axes[0], panels, strict=True):
        _place_labels(ax, *_points(ov.analysed), [str(r.spec.id) for r in ov.analysed],
                      fontsize=7)
    return figure_bytes(fig, fmt, 130)
