"""Derived answers about a task: how many SMs to give communication, and where a task leaves the
latency-bound regime (the collective answers are in ``derived``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pkbsim.errors import InfeasibleError, UsageError
from pkbsim.planning.evaluate import Target, evaluate, instance
from pkbsim.sim import Strategy, simulate
from pkbsim.sim.strategies import parse_overrides
from pkbsim.task.schema import CommOp


@dataclass(frozen=True)
class SmPoint:
    sms: int  # SMs each comm op holds while it runs (its ``sms`` override)
    time_us: float  # custom_best's predicted time
    carriers: tuple[str, ...]  # "op: algorithm/mechanism" chosen at this SM count


@dataclass(frozen=True)
class SmSplit:
    """custom_best's time against the SMs given to communication (compute keeps the rest)."""

    task: str
    topology: str
    world_size: int
    preset: str
    sm_count: int
    curve: tuple[SmPoint, ...]  # ascending SMs
    best_sms: int  # argmin of the curve (ties: fewer SMs)
    best_time_us: float
    default_time_us: float  # each mechanism's own sms_to_saturate
    default_sms: tuple[int, ...]  # what the default holds, per comm op
    default_carriers: tuple[str, ...]


def _custom_best(target: Target, point: Mapping[str, Any], sms: int | None,
                 mechanism: str | None) -> tuple[float, tuple[str, ...], tuple[int, ...]]:
    inst, topo, strat = instance(target, point)
    forced = {**strat, **({"sms": sms} if sms is not None else {}),
              **({"mechanism": mechanism} if mechanism else {})}
    comm = [op.id for op in inst.ops if isinstance(op, CommOp)]
    if not comm:
        raise UsageError(f"--task {target.task}: has no comm op to give SMs to")
    overrides = parse_overrides({op: dict(forced) for op in comm}, "--sms") if forced else {}
    res = simulate(inst, topo, Strategy("custom_best", overrides))
    how = [o.choice for o in res.ops if o.choice is not None]
    return (res.predicted_us, tuple(f"{c.op}: {c.algorithm}/{c.mechanism}" for c in how),
            tuple(c.sms for c in how))


def sm_split(target: Target, point: Mapping[str, Any] | None = None,
             mechanism: str | None = None, max_sms: int | None = None,
             refine: bool = True) -> SmSplit:
    """How many SMs to give communication before compute slows more than communication gains.

    The simulator gives a comm kernel holding s SMs a rate cap of B x eta x s / sms_to_saturate
    and leaves compute ``sm_count - s`` SMs while it runs (docs/metrics.md 9.2). The sweep forces
    ``sms`` on every comm op of custom_best at 1, 2, 4, ... and ``max_sms`` (default: the GPU's
    SM count), then bisects around the best power of two. custom_best picks its mechanism per
    SM count; a copy engine holds no SMs (``mechanism`` forces one)."""
    point = dict(point or {})
    inst, topo, _ = instance(target, point)
    top = max_sms if max_sms is not None else topo.gpu.sm_count
    if not 1 <= top <= topo.gpu.sm_count:
        raise UsageError(f"--max-sms {top}: expected 1 to {topo.gpu.sm_count} "
                         f"(the SMs of a {topo.gpu.model})")
    seen: dict[int, SmPoint] = {}

    def run(s: int) -> SmPoint:
        if s not in seen:
            t, how, _ = _custom_best(target, point, s, mechanism)
            seen[s] = SmPoint(s, t, how)
        return seen[s]

    for s in [*(2**k for k in range(top.bit_length()) if 2**k < top), top]:
        run(s)

    def best() -> SmPoint:
        return min(seen.values(), key=lambda p: (p.time_us, p.sms))

    while refine:  # bisect the gaps either side of the best until they close
        ordered = sorted(seen)
        i = ordered.index(best().sms)
        mids = {(ordered[j] + ordered[j + 1]) // 2 for j in (i - 1, i)
                if 0 <= j < len(ordered) - 1 and ordered[j + 1] - ordered[j] > 1}
        if not mids:
            break
        for s in mids:
            run(s)
    t_default, how, held = _custom_best(target, point, None, mechanism)
    b = best()
    return SmSplit(inst.spec.key, topo.name, inst.world_size, inst.preset,
                   topo.gpu.sm_count, tuple(seen[s] for s in sorted(seen)), b.sms, b.time_us,
                   t_default, held, how)


@dataclass(frozen=True)
class LatencyExit:
    """Where a task size parameter takes the roofline out of (or into) the latency regime."""

    task: str
    topology: str
    world_size: int
    preset: str
    param: str
    start_value: int  # the preset's
    start_binding: str
    direction: str  # up: smallest value not latency-bound; down: largest latency-bound value
    value: int | None  # None: no change within [1, max_value]
    binding: str | None  # at value
    t_roof_us: float | None  # at value
    other_value: int  # the bracket's other side (the last value in the start's regime)


def latency_exit(target: Target, param: str, point: Mapping[str, Any] | None = None,
                 max_value: int = 2**40, multiple_of: int = 1) -> LatencyExit:
    """The smallest ``param`` (a multiple of ``multiple_of``) at which the roofline's binding is
    no longer ``latency``, searched upwards from the preset's value by doubling and bisection;
    if the preset's value is not latency-bound, the largest value below it that is. Assumes
    one change between the bracket's ends."""
    point = dict(point or {})
    if param in point:
        raise UsageError(f"--param {param}: also given as a fixed value")
    inst, topo, _ = instance(target, point)
    if param not in inst.spec.settable():
        raise UsageError(f"--param {param}: not a parameter of {inst.spec.key} (parameters: "
                         + ", ".join(inst.spec.settable()) + ")")
    if multiple_of < 1:
        raise UsageError(f"--multiple-of {multiple_of}: expected a whole number >= 1")
    start = round(float(inst.values[param]) / multiple_of) * multiple_of or multiple_of

    def row(v: int) -> dict[str, Any]:
        try:
            return evaluate(target, {**point, param: v}, ("binding", "t_roof"))
        except InfeasibleError as exc:
            raise UsageError(f"--param {param}: the search reached {param} = {v}, which cannot "
                             f"run ({exc.message}); --multiple-of N keeps it to multiples of N"
                             ) from None

    def latency(v: int) -> bool:
        return bool(row(v)["binding"] == "latency")

    up = latency(start)
    cap = max(multiple_of, max_value // multiple_of * multiple_of)

    def snap(v: int) -> int:
        return max(multiple_of, v // multiple_of * multiple_of)

    inside, outside = start, None  # inside: the start's regime
    while outside is None:  # double (or halve) to bracket the change
        nxt = min(cap, snap(inside * 2)) if up else snap(inside // 2)
        if (nxt <= inside) if up else (nxt >= inside):
            return LatencyExit(inst.spec.key, topo.name, inst.world_size, inst.preset, param,
                               start, row(start)["binding"], "up" if up else "down", None,
                               None, None, inside)
        if latency(nxt) == up:
            inside = nxt
        else:
            outside = nxt
    while True:  # bisect between the two regimes on whole multiples
        mid = snap((inside + outside) // 2)
        if mid in (inside, outside):
            break
        if latency(mid) == up:
            inside = mid
        else:
            outside = mid
    found = outside
    r = row(found)
    return LatencyExit(inst.spec.key, topo.name, inst.world_size, inst.preset, param, start,
                       row(start)["binding"], "up" if up else "down", found, r["binding"],
                       r["t_roof_us"], inside)
