"""The plot of docs/planning.md question 6: one 1 GiB all-reduce and one 1 GiB all-to-all from
8 to 16,384 GPUs, on an InfiniBand fat tree of 8 x H100 nodes (1:1 and 2:1) and on GB200 NVL72
racks. Runs nothing: it reads the four sweeps' ``--jsonl`` files in docs/planning/ (the
commands are in docs/planning.md) and draws the simulated nccl_reference time (solid) and the
roofline t_roof (dashed) of every series against the world size, one panel per collective.

    python benchmarks/plot_q6_scale.py [--out docs/planning/q6_scale.png]

The same files give the same bytes (pkbsim's deterministic figure settings).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from pkbsim.report.images import deterministic_figures, figure_bytes

ROOT = Path(__file__).resolve().parents[1]
PLANNING = ROOT / "docs" / "planning"
TICKS = (8, 32, 128, 512, 2048, 16384)
YTICKS = (1, 2, 3, 5, 10, 20, 30, 50)
PANELS = (("all_reduce", "all-reduce, 1 GiB per rank"),
          ("all_to_all", "all-to-all, 1 GiB per rank"))
# (file stem, the rows of it to draw, label, colour)
SERIES = (("q6_ib_{kind}", {"scale_out.oversubscription": 1},
           "8 x H100 nodes, IB fat tree 1:1", "C0"),
          ("q6_ib_{kind}", {"scale_out.oversubscription": 2},
           "8 x H100 nodes, IB fat tree 2:1", "C1"),
          ("q6_nvl72_{kind}", {}, "GB200 NVL72 racks (72 GPUs), IB", "C2"))


def rows(path: Path) -> list[dict[str, Any]]:
    """The points of one sweep's JSON-lines file (its first line is the sweep's header)."""
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in lines if "pkbsim_sweep" not in r and r.get("error") is None]


def draw(out: Path) -> None:
    with deterministic_figures():
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, 2, figsize=(12, 5.2), dpi=100, sharey=True)
        for ax, (kind, title) in zip(axes, PANELS, strict=True):
            for stem, where, label, colour in SERIES:
                points = sorted((r for r in rows(PLANNING / f"{stem.format(kind=kind)}.jsonl")
                                 if all(r.get(k) == v for k, v in where.items())),
                                key=lambda r: r["world_size"])
                ws = [r["world_size"] for r in points]
                ax.plot(ws, [r["nccl_reference_us"] / 1e3 for r in points], marker="o", ms=3.5,
                        lw=1.5, color=colour, label=f"{label}: nccl_reference")
                ax.plot(ws, [r["t_roof_us"] / 1e3 for r in points], ls="--", lw=1.0,
                        color=colour, label=f"{label}: t_roof")
            ax.axvline(72, color="0.6", lw=0.8, ls=":")
            ax.text(72 * 1.08, 52, "72: one NVL72 rack", color="0.4", fontsize=8, va="top")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xticks(TICKS, [f"{t:,}" for t in TICKS])
            ax.set_yticks(YTICKS, [f"{t:g}" for t in YTICKS])
            ax.minorticks_off()
            ax.set_xlabel("world size (GPUs)")
            ax.set_title(title)
            ax.grid(True, which="major", lw=0.4, alpha=0.6)
        axes[0].set_ylabel("time of one call (ms)")
        axes[0].set_ylim(1, 60)
        axes[1].legend(fontsize=7.5, loc="lower right")
        fig.suptitle("pkbsim: one collective from 8 to 16,384 GPUs (docs/planning.md, question 6)",
                     fontsize=11)
        fig.tight_layout()
        out.write_bytes(figure_bytes(fig, out.suffix.lstrip(".") or "png", 100))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=PLANNING / "q6_scale.png")
    draw(parser.parse_args().out)


if __name__ == "__main__":
    main()
