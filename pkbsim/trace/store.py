"""Reference programs shipped with pkbsim (``tasks/traces/<task stem>.json``) and the choice of
one for a task instance. Pure: no torch, no PKB checkout.

A file holds one task's traced points, each at a world size and a setting of the task's size
parameters (PKB's ``--m``/``--n``, or a preset's own), with provenance. An instance at a traced
point uses that point's program as it is (``exact``; also ``equivalent``: a point where the
task file gives the same values and ops). Any other instance gets a program derived from at
least three points along each parameter that differs (``derived``, pkbsim.trace.derive); where
that is not possible, the nearest point with every kernel's bytes and FLOPs and every
collective's bytes scaled by the ratio the task file's own expressions give between the two
(``scaled``), with a warning saying why. pkbsim.trace.on_demand traces the instance itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from pkbsim.datafiles import data_dir
from pkbsim.errors import PkbsimError, TaskError
from pkbsim.inputs import loads_json, read_text
from pkbsim.task.schema import CommOp, ComputeOp, TaskInstance
from pkbsim.trace.format import recorded_mode
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
    """The program the reference runs at an instance, and where it came from."""

    program: Program
    point: Point  # the program's own point: its world size is the one its groups refer to
    how: str  # exact | equivalent | derived | scaled (the nearest point, one ratio) | on_demand
    ratios: tuple[float, float, float] = (1.0, 1.0, 1.0)  # scaled: bytes, FLOPs, comm bytes
    sources: tuple[Point, ...] = ()  # the traced points it came from
    warning: str = ""  # why a better method was not possible
    cache: str = ""  # on_demand: the cached trace
    asked: tuple[tuple[str, float], ...] = ()  # equivalent: the instance's W and parameters
    along: tuple[str, ...] = ()  # derived: the parameters fitted along
    note: str = ""  # why it was not traced on demand (pkbsim.trace.on_demand)

    def describe(self) -> str:
        return self._method() + (f"; {self.note}" if self.note else "")

    def _method(self) -> str:
        where = _where(self.point)
        if self.how == "exact":
            return f"traced ({where})"
        if self.how == "equivalent":
            asked = ", ".join(f"{k}={v:g}" for k, v in self.asked if k != "W")
            return (f"traced ({where}; the task file gives the same values and ops at "
                    f"{asked})")
        if self.how == "on_demand":
            return f"traced on demand at {where}, cached in {self.cache}"
        if self.how == "derived":
            return (f"derived at {where} from traced points {_points_text(self.sources)} "
                    f"(loop counts, operators, kernel bytes and FLOPs, collective bytes fitted "
                    f"along {', '.join(self.along)})")
        b, f, c = self.ratios
        return (f"nearest traced point ({where}), scaled (bytes x{b:.3g}, FLOPs x{f:.3g}, "
                f"comm x{c:.3g})" + (f"; warning: {self.warning}" if self.warning else ""))

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.how, "description": self.describe(),
                "world_size": self.point.world_size, "set": dict(self.point.sets),
                "points": [{"world_size": p.world_size, "set": dict(p.sets)}
                           for p in self.sources],
                **({"fitted_along": list(self.along)} if self.along else {}),
                **({"warning": self.warning} if self.warning else {}),
                **({"on_demand": self.note} if self.note else {}),
                **({"cache": self.cache} if self.cache else {})}


TASK_FILE_MODEL = "task file (operators and kernels as the task file lists them)"


def reference_text(chosen: ChosenProgram | None) -> str:
    """Which program the reference ran: a traced one (where, how) or the task file's ops."""
    return chosen.describe() if chosen is not None else TASK_FILE_MODEL


def reference_dict(chosen: ChosenProgram | None) -> dict[str, Any]:
    """The same as JSON: the method (exact, equivalent, derived, scaled, on_demand, task), the
    traced points it came from (the base first), a warning where better methods failed."""
    if chosen is not None:
        return chosen.to_dict()
    return {"method": "task", "description": TASK_FILE_MODEL, "points": []}


def _where(point: Point) -> str:
    sets = ", ".join(f"{k}={v:g}" for k, v in point.sets)
    return f"W = {point.world_size}" + (f", {sets}" if sets else "")


def _points_text(points: tuple[Point, ...]) -> str:
    from pkbsim.trace.derive import Traced, describe_points

    return describe_points([Traced((("W", float(p.world_size)), *p.sets), p.world_size,
                                   p.program) for p in points])


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
        origin = raw.get("provenance") or {}
        if not isinstance(origin, dict):
            raise fail(f"{where}.provenance", "expected an object")
        if "mode" in origin:  # an older file's "cpu" is today's "real"
            origin = {**origin, "mode": recorded_mode(origin["mode"]) or origin["mode"]}
        points.append(Point(w, tuple(sorted((str(k), float(v)) for k, v in sets.items())),
                            program, origin))
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
    """The program for ``inst``: the traced point itself, else one derived from at least three
    points per parameter that differs (``pkbsim.trace.derive``), else the nearest point scaled
    by the task file's totals, with a warning. ``at(world_size, sets)`` instantiates the task
    at a point (None when it cannot)."""
    if not points:
        return None
    why: list[str] = []
    usable = []
    for keys, family in families(points):
        coords = coords_in(inst, keys, at)
        if coords is None:
            why.append(f"no traced points vary what this instance sets ({_keys_text(keys)} "
                       "cannot express it)")
            continue
        target = (("W", float(inst.world_size)), *coords)
        by_coords = {_coords(p): p for p in family}
        if target in by_coords:
            p = by_coords[target]
            return ChosenProgram(p.program, p, "exact", sources=(p,))
        usable.append((keys, family, target, by_coords))
    for keys, family, target, _ in usable:
        same = next((p for p in family if p.world_size == inst.world_size
                     and _same_task(inst, at(p.world_size, dict(p.sets)), keys)), None)
        if same is not None:  # other parameters, but the task file's values and ops agree
            return ChosenProgram(same.program, same, "equivalent", sources=(same,),
                                 asked=target)
    found: list[tuple[tuple[int, float], ChosenProgram]] = []
    for _, family, target, by_coords in usable:
        chosen = _derived(inst, at, family, target, by_coords, why)
        if chosen is not None:
            found.append(chosen)
    if found:
        return min(found, key=lambda c: c[0])[1]
    scaled = _nearest_scaled(inst, points, at)
    if scaled is None:
        return None
    reasons = list(dict.fromkeys(why)) or ["no traced point fits"]
    return replace(scaled, warning="derivation not possible: " + "; ".join(reasons))


def families(points: tuple[Point, ...]) -> list[tuple[tuple[str, ...], list[Point]]]:
    """Points grouped by the parameters they were traced at (PKB's M and N, a preset's
    own), the larger groups first."""
    groups: dict[tuple[str, ...], list[Point]] = {}
    for p in points:
        groups.setdefault(tuple(k for k, _ in p.sets), []).append(p)
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))


def coords_in(inst: TaskInstance, keys: tuple[str, ...], at: Any
               ) -> tuple[tuple[str, float], ...] | None:
    """The instance in a family's parameters, when setting just those at its world size gives
    the same task (every parameter and derived value); else None."""
    if any(k not in inst.values for k in keys):
        return None
    coords = tuple((k, float(inst.values[k])) for k in keys)
    other = at(inst.world_size, dict(coords))
    if other is None or set(other.values) != set(inst.values):
        return None
    if any(not math.isclose(float(other.values[k]), float(v), rel_tol=1e-9, abs_tol=1e-12)
           for k, v in inst.values.items()):
        return None
    return coords


def _same_task(inst: TaskInstance, other: TaskInstance | None, keys: tuple[str, ...]) -> bool:
    """``other`` is ``inst`` but for the family's own parameters: every derived value and every
    op agree (PKB's inputs cap a size, so a larger M gives the same task)."""
    if other is None or other.ops != inst.ops or set(other.values) != set(inst.values):
        return False
    return all(math.isclose(float(other.values[k]), float(v), rel_tol=1e-9, abs_tol=1e-12)
               for k, v in inst.values.items() if k not in keys)


def _coords(p: Point) -> tuple[tuple[str, float], ...]:
    return (("W", float(p.world_size)), *p.sets)


def _keys_text(keys: tuple[str, ...]) -> str:
    return ", ".join(("W", *keys))


def _derived(inst: TaskInstance, at: Any, family: list[Point],
             target: tuple[tuple[str, float], ...],
             by_coords: dict[tuple[tuple[str, float], ...], Point], why: list[str]
             ) -> tuple[tuple[int, float], ChosenProgram] | None:
    """The best derivation in one family: the base with the fewest differing parameters (then
    the closest), each with at least three points along it through the base."""
    from pkbsim.trace.derive import Traced, derive

    want = dict(target)
    traced = {c: Traced(c, p.world_size, p.program) for c, p in by_coords.items()}
    candidates = []
    for c, base in traced.items():
        have = dict(c)
        differ = [a for a in want if have[a] != want[a]]
        series: dict[str, list[Traced]] = {}
        for axis in differ:
            along = [t for t in traced.values()
                     if all(dict(t.coords)[b] == have[b] for b in want if b != axis)]
            if len({dict(t.coords)[axis] for t in along}) < 3:
                why.append(f"fewer than 3 traced points along {axis}")
                break
            series[axis] = along
        else:
            distance = sum(abs(math.log(want[a] / have[a])) for a in differ
                           if want[a] > 0 and have[a] > 0)
            candidates.append(((len(differ), distance), base, series))
    for rank, base, series in sorted(candidates, key=lambda x: x[0]):
        derived = derive(base, series, target)
        if derived is None:
            why.append(f"the traced programs around {_where(by_coords[base.coords])} differ "
                       "in structure")
            continue
        used = {t.coords for t in derived.used}
        off = _task_file_check(inst, at, base.coords,
                               {a: [t.coords for t in ps if t.coords in used]
                                for a, ps in series.items()}, target)
        if off:
            why.append(f"from {_where(by_coords[base.coords])} the task file's own {off} "
                       f"does not follow the same fits along {', '.join(series)} "
                       "(its parameters interact)")
            continue
        sets = tuple((k, v) for k, v in target if k != "W")
        point = Point(int(want["W"]), sets, derived.program)
        return rank, ChosenProgram(derived.program, point, "derived",
                                   sources=tuple(by_coords[t.coords] for t in derived.used),
                                   along=tuple(series))
    return None


CHECK_TOLERANCE = 0.15  # the task file's numbers composed by the fits, against its own


def _task_file_check(inst: TaskInstance, at: Any, base: tuple[tuple[str, float], ...],
                     series: dict[str, list[tuple[tuple[str, float], ...]]],
                     target: tuple[tuple[str, float], ...]) -> str:
    """The task file's totals (bytes, FLOPs, collective bytes, collective calls, kernel
    launches) at the base point, carried to the instance by the same fits along the same
    points, must land within CHECK_TOLERANCE of its own values there: else the parameters
    interact (a chunk count that depends on W and M together) or saturate past the points.
    The quantity that does not, or ""."""
    from pkbsim.trace.derive import fit

    def numbers(coords: tuple[tuple[str, float], ...]) -> tuple[float, ...] | None:
        c = dict(coords)
        made = at(int(c.pop("W")), c)
        return None if made is None else _task_numbers(made)

    have = numbers(base)
    if have is None:
        return "model"
    along = {a: [(dict(c)[a], numbers(c)) for c in cs] for a, cs in series.items()}
    want, b, t = _task_numbers(inst), dict(base), dict(target)
    for i, name in enumerate(("bytes", "FLOPs", "collective bytes", "collective calls",
                              "kernel launches")):
        y = have[i]
        for axis, points in along.items():
            known = [(x, n[i]) for x, n in points if n is not None]
            if len({x for x, _ in known}) >= 2:
                f = fit([x for x, _ in known], [v for _, v in known])
                y = f.move(y, b[axis], t[axis])
        if abs(y - want[i]) > CHECK_TOLERANCE * max(abs(want[i]), abs(y)) and max(
                abs(want[i]), abs(y)) > 0:
            return name
    return ""


def _task_numbers(inst: TaskInstance) -> tuple[float, ...]:
    calls = sum(op.repeat for op in inst.ops if isinstance(op, CommOp))
    launches = sum(op.repeat * op.launches for op in inst.ops if isinstance(op, ComputeOp))
    return (*totals(inst), float(calls), float(launches))


def _nearest_scaled(inst: TaskInstance, points: tuple[Point, ...], at: Any
                    ) -> ChosenProgram | None:
    """The nearest point (same W where one was traced, then the task file's totals) with one
    ratio each for bytes, FLOPs and collective bytes: the fallback."""
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
    b, f, c = ratios
    return ChosenProgram(point.program.scaled(b, f, c), point, "scaled", (b, f, c),
                         sources=(point,))


def _ratio(want: float, have: float) -> float:
    if want == have:
        return 1.0
    if have <= 0 or want <= 0:
        return 1.0
    return want / have


def reference_program(inst: TaskInstance) -> ChosenProgram | None:
    """The traced program for a shipped task's instance, or None (no trace shipped, or a task
    file of the user's own whose sha differs from the shipped one)."""
    if not is_shipped(inst):
        return None
    return choose(inst, load_points(inst.spec.key), instantiator(inst))


def is_shipped(inst: TaskInstance) -> bool:
    spec = inst.spec
    shipped = data_dir("tasks") / f"{spec.key}.yaml"
    return bool(spec.file) and Path(spec.file).resolve() == shipped.resolve()


def instantiator(inst: TaskInstance) -> Any:
    """``at(world_size, sets)``: the task at a point (PKB's preset and the point's parameters),
    None when it cannot be made there."""
    from pkbsim.task.loader import instantiate

    spec = inst.spec
    known = set(spec.settable())

    def at(world_size: int, sets: dict[str, float]) -> TaskInstance | None:
        if not set(sets) <= known:
            return None
        try:
            return instantiate(spec, world_size, "pkb",
                               {k: int(v) if float(v).is_integer() else v for k, v in sets.items()})
        except PkbsimError:
            return None
    return at


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
