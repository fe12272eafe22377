"""Physical invariants of the model's predictions, checked over a grid of instances.

Every shipped task x each of its presets x world sizes x every shipped topology, where the
instance is valid (the rest are counted as skipped, by reason), and every collective kind,
algorithm and mechanism over sizes 1 B .. 1 GiB. The invariants (docs/metrics.md, Invariants):

- ``order``: t_roof <= custom_best <= nccl_reference (the roofline is a lower bound on any
  implementation; the best custom kernel can do at least what the reference does);
- ``host_call``: under the torch host model every collective the reference issues costs at
  least ``latency.host_collective_us`` of host time before its GPU part may start;
- ``finite``: no negative or non-finite time in the predicted times, the per-op breakdown, the
  critical path (offsets from the measured iteration's start too), the node records or the
  roofline's terms;
- ``monotone``: a bare collective's time does not fall as its size grows: every (algorithm,
  mechanism) simulated alone, and NCCL's choice wherever NCCL keeps its algorithm, protocol and
  channel count (where its tuner switches algorithm or protocol, or its channel rule gives each
  channel less to move, a larger call may run faster, as in NCCL: those steps are listed apart,
  in ``GridReport.nccl_steps``).

The checkers are pure functions of finished results (the tests feed them constructed
violations); :func:`check_grid` walks the grid and returns a :class:`GridReport`. Nothing here
prints.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from functools import cache

from pkbsim.collectives import ALGORITHMS
from pkbsim.errors import InfeasibleError
from pkbsim.placement import fabric_for
from pkbsim.roofline import Roofline, bound_comm_op, roofline
from pkbsim.sim import Strategy, simulate, simulate_collective
from pkbsim.sim.result import SimResult
from pkbsim.sim.strategies import CUSTOM_CHUNK_BYTES
from pkbsim.task.loader import instantiate, list_tasks, load_task
from pkbsim.task.schema import COMM_KINDS, CommOp, TaskInstance, TaskSpec
from pkbsim.topology.loader import list_topologies, load_topology
from pkbsim.topology.schema import Topology
from pkbsim.units import US

INVARIANTS = {
    "order": "t_roof <= custom_best <= nccl_reference",
    "host_call": "every collective costs at least latency.host_collective_us of host time "
                 "(torch host model)",
    "finite": "no negative or non-finite time in any output",
    "monotone": "a bare collective's time does not fall as its size grows",
}
WORLD_SIZES = (1, 2, 4, 8)  # with each topology's largest
SIZES = tuple(2**e for e in range(31))  # 1 B .. 1 GiB per rank
TOL_US = 1e-6  # times are rounded to 1e-6 us
REL_TOL = 1e-9


def _above(a: float, b: float) -> bool:
    """a > b beyond rounding."""
    return a > b + TOL_US + REL_TOL * abs(b)


@dataclass(frozen=True)
class Violation:
    invariant: str  # a key of INVARIANTS
    where: str  # "TASK PRESET W=n TOPOLOGY" or "KIND ALGORITHM/MECHANISM W=n TOPOLOGY"
    detail: str
    values: tuple[tuple[str, float], ...] = ()

    @property
    def key(self) -> tuple[str, str]:
        return (self.invariant, self.where)

    def __str__(self) -> str:
        return f"{self.invariant} @ {self.where}: {self.detail}"


def point_name(task: str, preset: str, world_size: int, topology: str) -> str:
    return f"{task} {preset} W={world_size} {topology}"


# ------------------------------------------------------------------ checkers

def check_order(where: str, t_roof_us: float, custom_us: float, reference_us: float
                ) -> list[Violation]:
    """t_roof <= custom_best <= nccl_reference."""
    values = (("t_roof_us", t_roof_us), ("custom_best_us", custom_us),
              ("nccl_reference_us", reference_us))
    out = []
    if _above(t_roof_us, custom_us):
        out.append(Violation("order", where, f"custom_best {custom_us:.6g} us below t_roof "
                             f"{t_roof_us:.6g} us", values))
    if _above(t_roof_us, reference_us):
        out.append(Violation("order", where, f"nccl_reference {reference_us:.6g} us below "
                             f"t_roof {t_roof_us:.6g} us", values))
    if _above(custom_us, reference_us):
        out.append(Violation("order", where, f"custom_best {custom_us:.6g} us above "
                             f"nccl_reference {reference_us:.6g} us", values))
    return out


def check_host_calls(where: str, result: SimResult, host_call_us: float) -> list[Violation]:
    """Each collective a rank runs on its stream follows a host call of at least
    ``host_call_us`` on that rank (the most recent one not yet used), ended before the
    collective became ready."""
    out = []
    pending: dict[int, tuple[float, float] | None] = {}
    for n in result.nodes:
        if n.work == "collective_call":
            pending[n.rank] = (n.start_us, n.end_us)
        elif n.work == "collective" and n.track != "host":
            call = pending.pop(n.rank, None)
            if call is None:
                out.append(Violation("host_call", where, f"{n.name} on rank {n.rank} "
                                     f"(iteration {n.iteration}) has no host call"))
                continue
            spent = call[1] - call[0]
            if spent + TOL_US < host_call_us:
                out.append(Violation("host_call", where, f"{n.name} on rank {n.rank}: host "
                                     f"call {spent:.6g} us < {host_call_us:.6g} us",
                                     (("host_us", spent), ("host_collective_us", host_call_us))))
            elif _above(call[1], n.ready_us):
                out.append(Violation("host_call", where, f"{n.name} on rank {n.rank} ready at "
                                     f"{n.ready_us:.6g} us before its host call ended "
                                     f"({call[1]:.6g} us)"))
    return out


def _times(result: SimResult) -> Iterator[tuple[str, float]]:
    """Every time a simulation reports, named; offsets from the iteration's start included."""
    yield "predicted_us", result.predicted_us
    yield "makespan_us", result.makespan_us
    yield "iteration_start_us", result.iteration_start_us
    for r, t in enumerate(result.per_rank_us):
        yield f"per_rank_us[{r}]", t
    for i, t in enumerate(result.window_us):
        yield f"window_us[{i}]", t
    yield "window length", result.window_us[1] - result.window_us[0]
    for op in result.ops:
        yield f"ops[{op.id}].gpu_us", op.gpu_us
        yield f"ops[{op.id}].host_us", op.host_us
        yield f"ops[{op.id}].start_us", op.start_us
        yield f"ops[{op.id}].end_us", op.end_us
        yield f"ops[{op.id}] end - start", op.end_us - op.start_us
    t0 = result.iteration_start_us
    for i, seg in enumerate(result.critical_path):
        yield f"critical_path[{i}] ({seg.name}) start from the iteration's start", \
            seg.start_us - t0
        yield f"critical_path[{i}] ({seg.name}) end - start", seg.end_us - seg.start_us
    for k, v in result.critical_shares.items():
        yield f"critical_path share {k}", v
    for n in result.nodes:
        yield f"node {n.rank}/{n.track}/{n.name}#{n.iteration} ready_us", n.ready_us
        yield f"node {n.rank}/{n.track}/{n.name}#{n.iteration} launch", n.start_us - n.ready_us
        yield f"node {n.rank}/{n.track}/{n.name}#{n.iteration} run", n.end_us - n.start_us


def check_finite(where: str, strategy: str, result: SimResult) -> list[Violation]:
    """No negative or non-finite time in a simulation's outputs (beyond rounding)."""
    return [Violation("finite", where, f"{strategy}: {name} = {t!r}", ((name, t),))
            for name, t in _times(result) if not math.isfinite(t) or t < -TOL_US]


def check_roofline_finite(where: str, roof: Roofline) -> list[Violation]:
    terms = {"t_comm_us": roof.t_comm_s, "t_mem_us": roof.t_mem_s, "t_comp_us": roof.t_comp_s,
             "t_latency_floor_us": roof.t_latency_floor_s, "t_roof_us": roof.t_roof_s}
    return [Violation("finite", where, f"roofline: {k} = {v / US!r}", ((k, v / US),))
            for k, v in terms.items() if not math.isfinite(v) or v < 0]


def check_monotone(where: str, sizes: Sequence[float], times_us: Sequence[float],
                   configs: Sequence[str] | None = None) -> list[Violation]:
    """Time non-decreasing in size: one violation per fall, naming both sizes. With
    ``configs`` (how each size ran), only falls between sizes run the same way count."""
    return [v for v, same in _falls(where, sizes, times_us, configs) if same]


def config_steps(where: str, sizes: Sequence[float], times_us: Sequence[float],
                 configs: Sequence[str]) -> list[Violation]:
    """Falls between sizes run differently (NCCL changed its algorithm, protocol or channels)."""
    return [v for v, same in _falls(where, sizes, times_us, configs) if not same]


def _falls(where: str, sizes: Sequence[float], times_us: Sequence[float],
           configs: Sequence[str] | None) -> Iterator[tuple[Violation, bool]]:
    how = list(configs) if configs is not None else [""] * len(sizes)
    for i in range(len(sizes) - 1):
        (a, ta), (b, tb) = (sizes[i], times_us[i]), (sizes[i + 1], times_us[i + 1])
        if _above(ta, tb):
            change = f" ({how[i]} -> {how[i + 1]})" if how[i] != how[i + 1] else ""
            yield (Violation("monotone", where, f"{tb:.6g} us at {b:g} B < {ta:.6g} us at "
                             f"{a:g} B{change}", (("size_a_bytes", a), ("time_a_us", ta),
                                                   ("size_b_bytes", b), ("time_b_us", tb))),
                   how[i] == how[i + 1])


# ------------------------------------------------------------------ one instance

@dataclass(frozen=True)
class PointResult:
    where: str
    violations: tuple[Violation, ...]
    seconds: float
    skipped: str | None = None  # why the topology rejects the instance, when it does


def check_instance(inst: TaskInstance, topo: Topology, where: str) -> PointResult:
    """Every instance invariant at one point: the roofline and both strategies."""
    begin = time.perf_counter()
    try:
        roof = roofline(inst, topo)
    except InfeasibleError as exc:  # e.g. no mechanism of the topology can carry an op
        return PointResult(where, (), time.perf_counter() - begin, skip_reason(exc.message))
    reference = simulate(inst, topo, Strategy("nccl_reference"))
    custom = simulate(inst, topo, Strategy("custom_best"))
    found = [*check_roofline_finite(where, roof),
             *check_order(where, roof.t_roof_s / US, custom.predicted_us,
                          reference.predicted_us),
             *check_host_calls(where, reference, topo.latency.host_collective_us),
             *check_finite(where, "nccl_reference", reference),
             *check_finite(where, "custom_best", custom)]
    return PointResult(where, tuple(found), time.perf_counter() - begin)


# ------------------------------------------------------------------ the grid

@dataclass(frozen=True)
class Point:
    spec: TaskSpec
    preset: str
    world_size: int
    topology: Topology

    @property
    def where(self) -> str:
        return point_name(str(self.spec.id), self.preset, self.world_size, self.topology.name)


def skip_reason(message: str) -> str:
    """The reason an instance is not valid, as a short category."""
    if "constraint" in message:
        return "task: world-size constraint fails"
    if "group" in message and "divide" in message:
        return "task: a group's size does not divide W"
    if "needs" in message and "GPUs" in message:
        return "topology: too few GPUs"
    return "topology: " + message.split(":")[0][:60]


def world_sizes_for(topo: Topology, sizes: Sequence[int] = WORLD_SIZES) -> list[int]:
    return sorted({*sizes, topo.total_gpus})


def grid(specs: Sequence[TaskSpec], topologies: Sequence[Topology],
         sizes: Sequence[int] = WORLD_SIZES, max_world_size: int | None = None
         ) -> tuple[list[tuple[Point, TaskInstance]], dict[str, int]]:
    """Valid instances of every task x preset x W x topology, and skips counted by reason.
    W: ``sizes`` and each topology's largest (up to ``max_world_size`` when given)."""
    points: list[tuple[Point, TaskInstance]] = []
    skipped: dict[str, int] = {}

    def skip(reason: str) -> None:
        skipped[reason] = skipped.get(reason, 0) + 1

    for spec in specs:
        for preset in spec.presets:
            for topo in topologies:
                for w in world_sizes_for(topo, sizes):
                    if max_world_size is not None and w > max_world_size:
                        skip(f"W > {max_world_size} (run time; --max-world-size)")
                        continue
                    if w > topo.total_gpus:
                        skip("topology: too few GPUs")
                        continue
                    try:
                        inst = instantiate(spec, w, preset)
                    except InfeasibleError as exc:
                        skip(skip_reason(exc.message))
                        continue
                    points.append((Point(spec, preset, w, topo), inst))
    return points, skipped


def sample(points: Sequence[tuple[Point, TaskInstance]], every: int, offset: int = 0
           ) -> list[tuple[Point, TaskInstance]]:
    """A deterministic sample: every ``every``-th point from ``offset``."""
    return list(points[offset::every])


# ------------------------------------------------------------------ bare collectives

@dataclass(frozen=True)
class Curve:
    """One bare collective's time at every size: ``how`` is ALGORITHM/MECHANISM (simulated
    alone, custom_best's pipeline chunks) or nccl (nccl_reference: NCCL's tuner, nccl-tests'
    host model)."""

    where: str
    sizes: tuple[float, ...]
    times_us: tuple[float, ...]
    configs: tuple[str, ...] | None = None  # NCCL: algorithm/protocol/channels at each size


def collective_instance(kind: str, world_size: int, nbytes: float) -> TaskInstance:
    from pkbsim.planning.evaluate import collective_spec  # planning imports the simulator

    return instantiate(collective_spec(kind), world_size, "pkb", {"size": nbytes})


def collective_world_sizes(topo: Topology) -> list[int]:
    """2, one node, and the whole machine."""
    return sorted({2, topo.gpus_per_node, topo.total_gpus})


def collective_curves(topo: Topology, kinds: Sequence[str] = COMM_KINDS,
                      sizes: Sequence[float] = SIZES,
                      world_sizes: Sequence[int] | None = None,
                      max_bytes_total: float | None = None) -> Iterator[Curve]:
    """Every (kind, algorithm, mechanism) the topology allows, and NCCL's choice, at each W.
    ``max_bytes_total`` drops sizes whose W x size (an all-gather's output) exceeds it."""
    for w in world_sizes if world_sizes is not None else collective_world_sizes(topo):
        for kind in kinds:
            use = [s for s in sizes if max_bytes_total is None or s * w <= max_bytes_total]
            probe = collective_instance(kind, w, 1024)
            op = probe.ops[0]
            assert isinstance(op, CommOp)
            try:
                cands = bound_comm_op(op, probe, fabric_for(topo)).candidates
            except InfeasibleError:
                continue
            for c in sorted({(c.algorithm, c.mechanism) for c in cands}):
                alg = ALGORITHMS[c[0]]
                times = [simulate_collective(
                    topo, kind, s, w, c[0], c[1],
                    alg.pipeline_chunks(kind, s, w, CUSTOM_CHUNK_BYTES)).time_s / US
                    for s in use]
                yield Curve(f"{kind} {c[0]}/{c[1]} W={w} {topo.name}", tuple(use),
                            tuple(times))
            nccl = Strategy("nccl_reference", host_model="nccl-tests")
            runs = [simulate(collective_instance(kind, w, s), topo, nccl) for s in use]
            yield Curve(f"{kind} nccl W={w} {topo.name}", tuple(use),
                        tuple(r.predicted_us for r in runs), tuple(_how(r) for r in runs))


def _how(result: SimResult) -> str:
    """NCCL's algorithm, protocol and channel count for the call."""
    c = result.ops[0].choice
    return "-" if c is None else f"{c.algorithm}/{c.protocol}/{c.sms}ch"


# ------------------------------------------------------------------ the report

@dataclass(frozen=True)
class GridReport:
    points: int  # instances checked
    skipped: dict[str, int] = field(hash=False)
    curves: int  # bare-collective curves checked
    curve_points: int
    violations: tuple[Violation, ...]
    seconds: float
    slowest: tuple[PointResult, ...] = ()  # the slowest instances, slowest first
    nccl_steps: tuple[Violation, ...] = ()  # falls where NCCL changed how it runs the call


def load_grid_inputs(tasks: Iterable[str] | None = None, topologies: Iterable[str] | None = None
                     ) -> tuple[list[TaskSpec], list[Topology]]:
    specs = [load_task(t) for t in tasks] if tasks is not None else [
        load_task(str(p)) for p in list_tasks()]
    topos = [load_topology(t) for t in (topologies if topologies is not None
                                        else list_topologies())]
    return specs, topos


@cache
def _topology(name: str) -> Topology:
    return load_topology(name)


def _check_named(task_file: str, preset: str, world_size: int, topology: str) -> PointResult:
    """One point in a worker process: files by name, so each worker keeps one topology object
    (and its caches of routes and standalone call times) per topology."""
    topo = _topology(topology)
    inst = instantiate(load_task(task_file), world_size, preset)
    return check_instance(inst, topo, point_name(str(inst.spec.id), preset, world_size,
                                                 topo.name))


def _check_points(points: Sequence[tuple[Point, TaskInstance]], jobs: int,
                  progress: Callable[[str], None] | None) -> Iterator[PointResult]:
    if jobs <= 1:
        for point, inst in points:
            if progress is not None:
                progress(point.where)
            yield check_instance(inst, point.topology, point.where)
        return
    named = [(p.spec.file, p.preset, p.world_size, p.topology.file or p.topology.name)
             for p, _ in points]
    with ProcessPoolExecutor(jobs) as pool:
        for res in pool.map(_check_named, *zip(*named, strict=True), chunksize=8):
            if progress is not None:
                progress(res.where)
            yield res


def check_grid(points: Sequence[tuple[Point, TaskInstance]], skipped: dict[str, int],
               topologies: Sequence[Topology] = (), curve_kinds: Sequence[str] = COMM_KINDS,
               curve_sizes: Sequence[float] = SIZES, max_bytes_total: float | None = None,
               progress: Callable[[str], None] | None = None, jobs: int = 1,
               curve_max_world_size: int | None = None) -> GridReport:
    """Check every instance of ``points`` (in ``jobs`` processes) and the bare-collective
    curves of ``topologies`` (at W up to ``curve_max_world_size``)."""
    begin = time.perf_counter()
    found: list[Violation] = []
    results: list[PointResult] = []
    skipped = dict(skipped)
    for res in _check_points(points, jobs, progress) if points else ():
        if res.skipped is not None:
            skipped[res.skipped] = skipped.get(res.skipped, 0) + 1
            continue
        results.append(res)
        found.extend(res.violations)
    curves = curve_points = 0
    steps: list[Violation] = []
    for topo in topologies:
        if progress is not None:
            progress(f"collectives on {topo.name}")
        sizes_w = [w for w in collective_world_sizes(topo)
                   if curve_max_world_size is None or w <= curve_max_world_size]
        for curve in collective_curves(topo, curve_kinds, curve_sizes, sizes_w,
                                       max_bytes_total=max_bytes_total):
            curves += 1
            curve_points += len(curve.sizes)
            found.extend(check_monotone(curve.where, curve.sizes, curve.times_us,
                                        curve.configs))
            if curve.configs is not None:
                steps.extend(config_steps(curve.where, curve.sizes, curve.times_us,
                                          curve.configs))
    slowest = tuple(sorted(results, key=lambda r: -r.seconds)[:10])
    return GridReport(len(results), dict(sorted(skipped.items())), curves, curve_points,
                      tuple(found), time.perf_counter() - begin, slowest, tuple(steps))
