"""The reference traced at the instance asked, on demand, where the shipped points do not hold
it (``pkbsim analyze``, ``simulate`` and ``compare``; docs/trace.md).

Needs torch (only in the tracer's child process, ``pkbsim.trace.launch``; this module never
imports it) and a ParallelKernelBench checkout (``--pkb-root`` or ``PKB_ROOT``). PKB's own
references are driven through its input generator (``--m``, ``--n``); an instance set
otherwise (a preset's shapes) is traced through the function file its shipped points came
from (``benchmarks/traces/``, in a checkout of pkbsim). The program is cached per task file,
parameters, W, recorded rank, torch version and PKB commit under ``$XDG_CACHE_HOME/pkbsim``
(else ``~/.cache/pkbsim``). ``PKBSIM_TRACE_ON_DEMAND=0`` (or ``--no-trace-on-demand``) turns
it off. Whatever stops it, the derived program stays, with the reason.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pkbsim.datafiles import data_dir
from pkbsim.errors import PkbsimError
from pkbsim.task.schema import TaskInstance
from pkbsim.trace.store import (
    ChosenProgram,
    Point,
    coords_in,
    families,
    instantiator,
    load_points,
    points_from_dict,
    points_to_dict,
    reference_program,
)

SWITCH_ENV = "PKBSIM_TRACE_ON_DEMAND"  # 0, off, false or no: off
PKB_ROOT_ENV = "PKB_ROOT"
CACHE_VERSION = 1
OFF = ("0", "off", "false", "no")
REAL_RANKS = 8  # above this W only fake tensors are tried (real ones take a process per rank)


@dataclass(frozen=True)
class OnDemand:
    """Whether to trace on demand, and with which PKB checkout."""

    enabled: bool = True
    pkb_root: Path | None = None
    timeout_s: float = 120.0
    cache: Path | None = None  # None: the user's cache folder


def on_demand(enabled: bool = True, pkb_root: str | os.PathLike[str] | None = None
              ) -> OnDemand:
    """The settings of a command: its switch, and ``PKBSIM_TRACE_ON_DEMAND`` (which can only
    turn it off); its ``--pkb-root``, else ``PKB_ROOT``."""
    off = os.environ.get(SWITCH_ENV, "").strip().lower() in OFF
    root = pkb_root if pkb_root is not None else os.environ.get(PKB_ROOT_ENV) or None
    return OnDemand(enabled and not off, Path(root) if root is not None else None)


def cache_folder() -> Path:
    base = os.environ.get("XDG_CACHE_HOME", "")
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".cache"
    return root / "pkbsim" / "traces"


def reference_for(inst: TaskInstance, settings: OnDemand | None) -> ChosenProgram | None:
    """The shipped point, else the program traced on demand (cached), else the derived one
    with the reason it was not traced."""
    chosen = reference_program(inst)
    if settings is None or chosen is None or chosen.how in ("exact", "equivalent"):
        return chosen
    if not settings.enabled:
        return replace(chosen, note=f"tracing on demand is off ({SWITCH_ENV} or "
                                    "--no-trace-on-demand)")
    plan = _plan(inst, settings)
    if isinstance(plan, str):
        return replace(chosen, note=f"not traced on demand: {plan}")
    cached = _cached(plan.path)
    if cached is not None:
        return ChosenProgram(cached.program, cached, "on_demand", cache=str(plan.path))
    try:
        point = _trace(plan, settings)
    except (PkbsimError, OSError) as exc:
        text = exc.one_line() if isinstance(exc, PkbsimError) else str(exc)
        return replace(chosen, note=f"tracing on demand failed: {text[:300]}")
    from pkbsim.files import json_text, write_atomic

    plan.path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(plan.path, json_text(points_to_dict([point], {"key": plan.key}), indent=None,
                                      separators=(",", ":")) + "\n")
    return ChosenProgram(point.program, point, "on_demand", cache=str(plan.path))


@dataclass(frozen=True)
class _Plan:
    world_size: int
    sets: tuple[tuple[str, float], ...]
    rank: int
    pkb_root: Path
    problem: int
    function: str = ""  # FILE.py:NAME, else PKB's reference through its input generator
    inputs: str = "make_inputs"
    key: dict[str, Any] = field(default_factory=dict)
    path: Path = Path()


def _plan(inst: TaskInstance, settings: OnDemand) -> _Plan | str:
    """What to trace, or why it cannot be."""
    import hashlib
    import importlib.util
    import json

    if importlib.util.find_spec("torch") is None:
        return "torch is not installed"
    root = settings.pkb_root
    if root is None:
        return f"no PKB checkout ({PKB_ROOT_ENV} or --pkb-root)"
    if not (root / "reference").is_dir():
        return f"{root} is not a ParallelKernelBench checkout (no reference/)"
    spec = inst.spec
    points = load_points(spec.key)
    rank = _rank(points, inst.world_size)
    at = instantiator(inst)
    pkb_keys = tuple(k for k in ("M", "N") if k in spec.settable())
    coords = coords_in(inst, pkb_keys, at)
    plan: _Plan | None = None
    if coords is not None and all(float(v).is_integer() for _, v in coords):
        plan = _Plan(inst.world_size, coords, rank, root, spec.id)
    else:
        for keys, family in families(points):
            made_by = family[0].provenance.get("function")
            if not isinstance(made_by, str) or not keys:
                continue
            file = data_dir("tasks").parent / made_by.rpartition(":")[0]
            coords = coords_in(inst, keys, at)
            if coords is not None and file.is_file():
                plan = _Plan(inst.world_size, coords, rank, root, spec.id,
                             f"{file}:{made_by.rpartition(':')[2]}",
                             str(family[0].provenance.get("inputs") or "make_inputs"))
                break
    if plan is None:
        return ("PKB's input generator takes only M and N, and no traced function file "
                f"makes this instance ({', '.join(f'{k}={v:g}' for k, v in inst.overrides.items())}"
                f"{', ' if inst.overrides else ''}preset {inst.preset})")
    key = _key(inst, plan)
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]
    folder = settings.cache or cache_folder()
    return replace(plan, key=key, path=folder / f"{spec.key}.W{inst.world_size}.{digest}.json")


def _rank(points: tuple[Point, ...], world_size: int) -> int:
    """The rank the shipped points were traced at: the last where they were, else 0."""
    votes = Counter("last" if p.provenance.get("rank") == p.world_size - 1 else "first"
                    for p in points if p.world_size > 1)
    return world_size - 1 if votes and votes.most_common(1)[0][0] == "last" else 0


def _key(inst: TaskInstance, plan: _Plan) -> dict[str, Any]:
    import hashlib
    from importlib.metadata import PackageNotFoundError, version

    from pkbsim.trace.launch import checkout_commit

    try:
        torch = version("torch")
    except PackageNotFoundError:
        torch = ""
    key: dict[str, Any] = {"version": CACHE_VERSION, "task": inst.spec.key,
                           "task_sha256": inst.spec.sha256, "world_size": inst.world_size,
                           "set": dict(plan.sets), "rank": plan.rank, "torch": torch,
                           "pkb_commit": checkout_commit(plan.pkb_root)}
    if plan.function:
        file = Path(plan.function.rpartition(":")[0])
        key.update(function=f"{file.name}:{plan.function.rpartition(':')[2]}",
                   inputs=plan.inputs,
                   function_sha256=hashlib.sha256(file.read_bytes()).hexdigest())
    return key


def _cached(path: Path) -> Point | None:
    from pkbsim.inputs import loads_json, read_text

    if not path.is_file():
        return None
    try:
        _, points = points_from_dict(loads_json(read_text(path), file=str(path)), str(path))
    except (PkbsimError, OSError):
        return None  # a damaged cache entry is traced again
    return points[0] if len(points) == 1 else None


def _trace(plan: _Plan, settings: OnDemand) -> Point:
    import tempfile

    from pkbsim.errors import InfeasibleError
    from pkbsim.trace.fold import PROVENANCE_KEYS
    from pkbsim.trace.format import load_trace
    from pkbsim.trace.launch import TraceJob, run_trace
    from pkbsim.trace.program import program_of

    mode = "auto" if plan.world_size <= REAL_RANKS else "fake"
    sets = dict(plan.sets)
    with tempfile.TemporaryDirectory(prefix="pkbsim-trace-") as tmp:
        if plan.function:
            job = TraceJob(plan.world_size, Path(tmp), function=plan.function,
                           inputs=plan.inputs, sets=tuple(f"{k}={_text(v)}" for k, v in plan.sets),
                           timeout_s=settings.timeout_s, mode=mode, rank=plan.rank,
                           env=((PKB_ROOT_ENV, str(plan.pkb_root)),))
        else:
            job = TraceJob(plan.world_size, Path(tmp), plan.pkb_root, (plan.problem,),
                           int(sets.get("M", 1024)), int(sets.get("N", 1024)),
                           plan.key.get("pkb_commit", ""), timeout_s=settings.timeout_s,
                           mode=mode, rank=plan.rank)
        outcome = run_trace(job)[0]
        if outcome.status != "ok" or outcome.path is None:
            raise InfeasibleError(outcome.error or "the tracer wrote no trace")
        trace = load_trace(outcome.path)
    meta = trace.meta
    provenance: dict[str, Any] = {k: meta[k] for k in PROVENANCE_KEYS if k in meta}
    return Point(plan.world_size, plan.sets, program_of(trace), provenance)


def _text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(value)
