"""Reference programs shipped with pkbsim (``tasks/traces/<task stem>.json``) and the choice of
one for a task instance. Pure: no torch, no PKB checkout.

A file holds one task's traced points, each at a world size and a setting of the task's size
parameters (PKB's ``--m``/``--n``), with provenance. An instance at a traced point uses that
point's program as it is (``exact``); any other instance uses the nearest point, at its world
size if one was traced there, with every kernel's bytes and FLOPs and every collective's bytes
scaled by the ratio the task file's own expressions give between the two (``scaled``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from pkbsim.datafiles import data_dir
from pkbsim.errors import PkbsimError, TaskError
from pkbsim.inputs import loads_json, read_text
from pkbsim.task.schema import CommOp, ComputeOp, TaskInstance
from pkbsim.trace.program import Program, program_from_dict, program_to_dict

FORMAT = "pkbsim-reference-programs"
VERSION = 1
FOLDER = "traces"


@dataclass(frozen=True)
class Point:
    world_size: int
    sets: tuple[tuple[str, float], ...]  # the task parameters the trace was made at
    program: Program
    provenance: dict[str, Any] = field(hash=False, default_factory=dict)


@dataclass(frozen=True)
class ChosenProgram:
    program: Program
    point: Point
    how: str  # exact | scaled
    ratios: tuple[float, float, float] = (1.0, 1.0, 1.0)  # bytes, FLOPs, collective bytes

    def describe(self) -> str:
        sets = ", ".join(f"{k}={v:g}" for k, v in self.point.sets)
        where = f"W = {self.point.world_size}" + (f", {sets}" if sets else "")
        if self.how == "exact":
            return f"traced ({where})"
        b, f, c = self.ratios
        return f"traced at {where}, scaled (bytes x{b:.3g}, FLOPs x{f:.3g}, comm x{c:.3g})"


def programs_path(stem: str) -> Path:
    return data_dir("tasks") / FOLDER / f"{stem}.json"


def points_to_dict(points: list[Point], provenance: dict[str, Any]) -> dict[str, Any]:
    return {"format": FORMAT, "version": VERSION, "provenance": provenance,
            "points": [{"world_size": p.world_size, "set": dict(p.sets),
                        **({"provenance": p.provenance} if p.provenance else {}),
                        **program_to_dict(p.program)}
                       for p in sorted(points, key=lambda p: (p.world_size, p.sets))]}


def points_from_dict(data: Any, file: str) -> tuple[dict[str, Any], list[Point]]:
    def fail(where: str, why: str) -> PkbsimError:
        return TaskError(why, file=file, field=where)

    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise fail("format", f"expected {FORMAT!r}")
    if data.get("version") != VERSION:
        raise fail("version", f"this pkbsim reads version {VERSION}")
    raw_points = data.get("points")
    if not isinstance(raw_points, list):
        raise fail("points", "expected a list")
    points = []
    for i, raw in enumerate(raw_points):
        where = f"points[{i}]"
        if not isinstance(raw, dict):
            raise fail(where, "expected an object")
        w = raw.get("world_size")
        if isinstance(w, bool) or not isinstance(w, int) or w < 1:
            raise fail(f"{where}.world_size", "expected a positive integer")
        sets = raw.get("set", {})
        if not isinstance(sets, dict) or any(isinstance(v, bool) or not isinstance(v, (int, float))
                                             for v in sets.values()):
            raise fail(f"{where}.set", "expected a mapping of parameter to number")
        program = program_from_dict(raw, lambda f, why, w=where: fail(f"{w}.{f}", why))
        points.append(Point(w, tuple(sorted((str(k), float(v)) for k, v in sets.items())),
                            program, raw.get("provenance") or {}))
    provenance = data.get("provenance")
    return provenance if isinstance(provenance, dict) else {}, points


@lru_cache(maxsize=128)
def load_points(stem: str) -> tuple[Point, ...]:
    """The shipped points of one task, () when it has none."""
    path = programs_path(stem)
    if not path.is_file():
        return ()
    return tuple(points_from_dict(loads_json(read_text(path), file=str(path)), str(path))[1])


def totals(inst: TaskInstance) -> tuple[float, float, float]:
    """The task model's bytes, FLOPs and collective bytes per call (the scaling basis)."""
    hbm = flops = comm = 0.0
    for op in inst.ops:
        if isinstance(op, ComputeOp):
            hbm += op.hbm_bytes * op.repeat
            flops += op.flops * op.repeat
        elif isinstance(op, CommOp):
            comm += op.bytes_per_rank * op.repeat
    return hbm, flops, comm


def choose(inst: TaskInstance, points: tuple[Point, ...], at: Any) -> ChosenProgram | None:
    """The program for ``inst``: ``at(world_size, sets)`` instantiates the task at a point
    (None when it cannot)."""
    if not points:
        return None
    want = totals(inst)
    best: tuple[float, Point, tuple[float, ...]] | None = None
    for p in points:
        other = at(p.world_size, dict(p.sets))
        if other is None:
            continue
        have = totals(other)
        ratios = tuple(_ratio(a, b) for a, b in zip(want, have, strict=True))
        distance = (abs(math.log2(p.world_size / inst.world_size)) * 100
                    + sum(abs(math.log(r)) for r in ratios))
        if best is None or distance < best[0]:
            best = (distance, p, ratios)
    if best is None:
        return None
    _, point, ratios = best
    exact = point.world_size == inst.world_size and all(r == 1.0 for r in ratios)
    b, f, c = ratios
    return ChosenProgram(point.program.scaled(b, f, c), point,
                         "exact" if exact else "scaled", (b, f, c))


def _ratio(want: float, have: float) -> float:
    if want == have:
        return 1.0
    if have <= 0 or want <= 0:
        return 1.0
    return want / have


def reference_program(inst: TaskInstance) -> ChosenProgram | None:
    """The traced program for a shipped task's instance, or None (no trace shipped, or a task
    file of the user's own whose sha differs from the shipped one)."""
    from pkbsim.task.loader import instantiate

    spec = inst.spec
    shipped = data_dir("tasks") / f"{spec.key}.yaml"
    if not spec.file or Path(spec.file).resolve() != shipped.resolve():
        return None
    points = load_points(spec.key)

    def at(world_size: int, sets: dict[str, float]) -> TaskInstance | None:
        known = set(spec.settable())
        if not set(sets) <= known:
            return None
        try:
            return instantiate(spec, world_size, "pkb",
                               {k: int(v) if float(v).is_integer() else v for k, v in sets.items()})
        except PkbsimError:
            return None
    return choose(inst, points, at)


def sets_for(spec_settable: list[str], meta: dict[str, Any]) -> dict[str, float]:
    """The task parameters a trace was made at: PKB's ``rows``/``cols`` are its ``M``/``N``;
    a function's ``--set`` values count where the task has a parameter of that name."""
    found: dict[str, float] = {}
    if "rows" in meta:
        found.update(M=meta["rows"], N=meta.get("cols", 1024))
    for key, value in (meta.get("params") or {}).items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            found[key] = value
    return {k: float(v) for k, v in found.items() if k in spec_settable}


def merged(existing: list[Point], new: list[Point]) -> list[Point]:
    """``existing`` with each point of ``new`` added, replacing one at the same place."""
    keep = {(p.world_size, p.sets): p for p in existing}
    for p in new:
        keep[(p.world_size, p.sets)] = p
    return list(keep.values())
