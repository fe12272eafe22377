"""Plots of ``pkbsim plan`` answers: the curves a threshold or a crossover was read from.

Both take the doubling-grid curves the search evaluated (``derived.Curves``) and return image
bytes; the CLI decides where they go.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pkbsim.report.images import deterministic_figures, figure_bytes
from pkbsim.units import GB, US, format_bytes

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from pkbsim.planning.derived import Crossover, Curves, ThresholdResult


def _size_axis(ax: Axes, sizes: Sequence[int]) -> None:
    ax.set_xscale("log", base=2)
    ticks = sorted(set(sizes))
    step = max(1, len(ticks) // 10)
    ax.set_xticks(ticks[::step], [format_bytes(t) for t in ticks[::step]])
    ax.set_xlabel("size (bytes per rank)")
    ax.grid(True, which="major", color="#eeeeee", lw=0.6)


def _save(fig: Figure, fmt: str) -> bytes:
    fig.tight_layout()
    return figure_bytes(fig, fmt, 130)


def crossover_plot(title: str, curves: Curves, crossings: Sequence[Crossover],
                   fmt: str = "png") -> bytes:
    """Each contender's time against size (log-log); the crossings as dashed verticals."""
    with deterministic_figures():
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(9, 5.5), dpi=100)
        sizes: list[int] = []
        for label, points in curves.items():
            ax.plot([m for m, _ in points], [t / US for _, t in points], marker="o", ms=3,
                    lw=1.4, label=label)
            sizes += [m for m, _ in points]
        for c in crossings:
            ax.axvline(c.size_bytes, ls="--", lw=1, color="#555555")
            ax.annotate(f"{c.below} → {c.above}\n{format_bytes(c.size_bytes)}",
                        (c.size_bytes, c.above_time_us), textcoords="offset points",
                        xytext=(4, 8), fontsize=7, color="#333333")
        _size_axis(ax, sizes)
        ax.set_yscale("log")
        ax.set_ylabel("time of one call (µs)")
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=8)
        return _save(fig, fmt)


def threshold_plot(title: str, curves: Curves, results: Sequence[ThresholdResult],
                   fmt: str = "png") -> bytes:
    """Each mechanism's busbw against size; the line rate and the target as horizontals; the
    threshold sizes marked."""
    with deterministic_figures():
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(9, 5.5), dpi=100)
        sizes: list[int] = []
        for index, (label, points) in enumerate(curves.items()):
            colour = f"C{index % 10}"
            ax.plot([m for m, _ in points], [bw / GB for _, bw in points], marker="o", ms=3,
                    lw=1.4, color=colour, label=label)
            sizes += [m for m, _ in points]
            hit = next((r for r in results if r.mechanism == label), None)
            if hit is not None and hit.size_bytes is not None and \
                    hit.busbw_at_size_GBps is not None:
                ax.plot([hit.size_bytes], [hit.busbw_at_size_GBps], marker="*", ms=12,
                        color=colour, ls="none")
        if results:
            ax.axhline(results[0].line_rate_busbw_GBps, ls="--", lw=1.1, color="#333333",
                       label=f"line rate {results[0].line_rate_busbw_GBps:.4g} GB/s")
            ax.axhline(results[0].target_busbw_GBps, ls=":", lw=1.1, color="#333333",
                       label=f"{results[0].fraction:g} x line rate")
        _size_axis(ax, sizes)
        ax.set_ylabel("busbw (GB/s, nccl-tests)")
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=8)
        return _save(fig, fmt)
