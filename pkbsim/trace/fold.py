"""Fold traces into a task's reference-program file (``<folder>/<task stem>.json``)."""

from __future__ import annotations

from pathlib import Path

from pkbsim.files import json_text, write_atomic
from pkbsim.inputs import loads_json, read_text
from pkbsim.task.loader import load_task
from pkbsim.trace.format import load_trace
from pkbsim.trace.program import program_of
from pkbsim.trace.store import Point, merged, points_from_dict, points_to_dict, sets_for

PROVENANCE_KEYS = ("pkb_commit", "torch", "mode", "rank", "rows", "cols", "function", "inputs",
                   "params")


def fold_into(folder: Path, traces: list[Path], task: str | None = None) -> list[str]:
    """Add each trace as a point of its task's file; one line per file written. ``task``
    names the task for traces of a user's function (PKB's carry their problem id)."""
    by_stem: dict[str, list[Point]] = {}
    for path in traces:
        trace = load_trace(path)
        name = task or str(trace.meta.get("pkb_problem", ""))
        if not name:
            continue
        spec = load_task(name)
        point = Point(trace.world_size,
                      tuple(sorted(sets_for(spec.settable(), trace.meta).items())),
                      program_of(trace),
                      {k: trace.meta[k] for k in PROVENANCE_KEYS if k in trace.meta})
        by_stem.setdefault(spec.key, []).append(point)
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for stem, points in sorted(by_stem.items()):
        path = folder / f"{stem}.json"
        provenance = {"made_by": "pkbsim trace ... --programs (pkbsim.trace.fold)",
                      "format_doc": "docs/trace.md"}
        old: list[Point] = []
        if path.is_file():
            provenance, old = points_from_dict(loads_json(read_text(path), file=str(path)),
                                               str(path))
        all_points = merged(old, points)
        write_atomic(path, json_text(points_to_dict(all_points, provenance), indent=None,
                                     separators=(",", ":")) + "\n")
        lines.append(f"{path}: {len(all_points)} point(s)")
    return lines
