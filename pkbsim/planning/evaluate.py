"""One sweep point: a task (or a single collective) on a topology, its roofline and predictions.

A point is a mapping of axis names to values. Names it understands:

- ``task`` (id, name or alias: sweeps several tasks; replaces the target's task),
  ``topology`` (a name or YAML path), ``world_size``, ``preset`` (tasks);
- ``size``: bytes per rank of a single-collective target (nccl-tests' buffer convention);
- ``algorithm``, ``mechanism``, ``protocol``, ``chunks``, ``sms``: forced on every comm op of the
  target, in both strategies (``--override`` of pkbsim simulate);
- a dotted name (``scale_up.link_bandwidth_GBps``): a topology field, as ``--set``;
- any other name: a task parameter, as ``--set`` (``M``, ``seq_len``).

Metrics (``METRICS``): the roofline terms, the simulated times of ``nccl_reference`` and
``custom_best``, nccl-tests' algbw and busbw of a single collective and attainment (t_roof over
the simulated time). Each row's columns carry their unit: ``*_us``, ``*_GBps``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from pkbsim.collectives.bandwidth import algbw_busbw
from pkbsim.comparator.reference import reference_model
from pkbsim.errors import PkbsimError, TopologyError, UsageError, did_you_mean
from pkbsim.fields import load_yaml
from pkbsim.roofline import roofline
from pkbsim.sim import Strategy, simulate
from pkbsim.sim.strategies import HOST_MODELS, OVERRIDE_KEYS, parse_overrides
from pkbsim.task.loader import instantiate, load_task, parse_task
from pkbsim.task.schema import COMM_KINDS, CommOp, TaskInstance, TaskSpec
from pkbsim.topology.loader import DEFAULT_TOPOLOGY, apply_overrides, find_topology, parse_topology
from pkbsim.topology.schema import Topology
from pkbsim.units import GB, US

ROOFLINE_TERMS = ("t_comm", "t_mem", "t_comp", "t_latency", "t_roof", "binding")
SIMULATED = ("nccl_reference", "custom_best")
METRICS = (*ROOFLINE_TERMS, *SIMULATED, "algbw", "busbw", "attainment")
DEFAULT_METRICS = ("t_roof", "binding", "nccl_reference", "custom_best")
POINT_KEYS = ("task", "topology", "world_size", "preset", "size")
DEFAULT_COLLECTIVE_BYTES = 2**20
DEFAULT_COLLECTIVE_WORLD = 8


@dataclass(frozen=True)
class Target:
    """What a sweep evaluates: a task (id, name, alias or YAML path) or one collective kind."""

    task: str | None = None
    collective: str | None = None
    topology: str = DEFAULT_TOPOLOGY  # when no ``topology`` axis
    preset: str = "pkb"
    host_model: str | None = None  # HOST_MODELS; None: nccl-tests for a collective, else torch

    def __post_init__(self) -> None:
        if (self.task is None) == (self.collective is None):
            raise UsageError("give either --task or --collective")
        if self.collective is not None and self.collective not in COMM_KINDS:
            raise UsageError(f"--collective {self.collective}: expected one of "
                             + ", ".join(COMM_KINDS))
        if self.host_model is not None and self.host_model not in HOST_MODELS:
            raise UsageError(f"--host-model {self.host_model}: expected one of "
                             + ", ".join(HOST_MODELS))

    @property
    def host(self) -> str:
        """The host model of simulated times: a bare collective is timed as nccl-tests does
        (a C loop), a task as PKB's Python reference (torch)."""
        if self.host_model is not None:
            return self.host_model
        return "nccl-tests" if self.collective is not None else "torch"

    @property
    def label(self) -> str:
        return self.task if self.task is not None else f"{self.collective} (one call)"


def parse_metrics(names: Sequence[str]) -> tuple[str, ...]:
    """``--metric`` values (``roofline`` = every roofline term) -> metric names, in order."""
    out: list[str] = []
    for name in names or DEFAULT_METRICS:
        for part in (p.strip() for p in name.split(",")):
            expanded = ROOFLINE_TERMS if part == "roofline" else (part,)
            for m in expanded:
                if m not in METRICS:
                    raise UsageError(f"--metric {part}: expected one of roofline, "
                                     + ", ".join(METRICS)
                                     + did_you_mean(part, ("roofline", *METRICS)))
                if m not in out:
                    out.append(m)
    return tuple(out)


def columns(metrics: Sequence[str], target: Target) -> list[str]:
    """The result columns the metrics produce, in order (units in the names)."""
    sims = simulated(metrics)
    cols: list[str] = []
    for m in metrics:
        if m in ROOFLINE_TERMS:
            cols.append(m if m == "binding" else f"{m}_us")
        elif m in SIMULATED:
            cols.append(f"{m}_us")
        elif m in ("algbw", "busbw"):
            if target.collective is not None:
                cols += [f"{s}_{m}_GBps" for s in sims]
        elif m == "attainment":
            cols += [f"{s}_attainment" for s in sims]
    if target.collective is not None and ("algbw" in metrics or "busbw" in metrics):
        cols.append("line_rate_busbw_GBps")
    return cols


def simulated(metrics: Sequence[str]) -> tuple[str, ...]:
    """Strategies the metrics need: those named, else nccl_reference for bandwidth/attainment."""
    named = tuple(s for s in SIMULATED if s in metrics)
    if named:
        return named
    if any(m in metrics for m in ("algbw", "busbw", "attainment")):
        return ("nccl_reference",)
    return ()


@lru_cache(maxsize=64)
def _spec(task: str) -> TaskSpec:
    return load_task(task)


@lru_cache(maxsize=64)
def collective_spec(kind: str) -> TaskSpec:
    """A one-op task: each rank hands ``size`` bytes to one ``kind`` call."""
    op: dict[str, Any] = {"id": "call", "kind": kind, "bytes_per_rank": "size"}
    if kind in ("broadcast", "reduce", "scatter", "gather"):
        op["root"] = 0
    if kind == "send_recv":
        op["pattern"] = "ring"
    data = {"schema_version": 1, "id": 1, "name": f"one_{kind}", "title": f"One {kind} call",
            "source": "pkbsim sweep --collective", "parallelism": "primitive",
            "world_size": {"default": DEFAULT_COLLECTIVE_WORLD},
            "params": {"size": {"value": DEFAULT_COLLECTIVE_BYTES, "help": "bytes per rank"}},
            "presets": {"pkb": {"description": "1 MiB per rank", "source": "pkbsim default"}},
            "ops": [op]}
    return parse_task(data, f"--collective {kind}")


@lru_cache(maxsize=32)
def _topology_file(name: str) -> tuple[str, Mapping[str, Any], str]:
    path = find_topology(name)
    data, sha = load_yaml(path, TopologyError)
    return str(path), data, sha


@lru_cache(maxsize=256)
def _topology(name: str, sets: tuple[tuple[str, Any], ...]) -> Topology:
    """load_topology with the file read once per process (a sweep varies fields, not files)."""
    path, data, sha = _topology_file(name)
    return parse_topology(apply_overrides(data, dict(sets), path) if sets else data, path, sha)


def _split(point: Mapping[str, Any], spec: TaskSpec
           ) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(task parameters, topology fields, strategy overrides) of a point."""
    task: dict[str, Any] = {}
    topo: dict[str, Any] = {}
    strat: dict[str, Any] = {}
    settable = set(spec.settable())
    for key, value in point.items():
        if key in ("task", "topology", "world_size", "preset"):
            continue
        if key in OVERRIDE_KEYS:
            strat[key] = value
        elif "." in key:
            topo[key] = _topology_value(value)
        elif key in settable:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise UsageError(f"--vary {key}: {value!r} is not a number (task parameter of "
                                 f"{spec.key})")
            task[key] = value
        else:
            raise UsageError(f"--vary {key}: not a task parameter of {spec.key} (parameters: "
                             + ", ".join(spec.settable()) + "), a dotted topology field, "
                             "or one of task, topology, world_size, preset, "
                             + ", ".join(OVERRIDE_KEYS) + did_you_mean(
                                 key, [*spec.settable(), *POINT_KEYS, *OVERRIDE_KEYS]))
    return task, topo, strat


def _topology_value(value: Any) -> Any:
    """``true``/``false`` from the command line as booleans (scale_up.multicast=false)."""
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return value


def instance(target: Target, point: Mapping[str, Any]) -> tuple[TaskInstance, Topology,
                                                                 dict[str, Any]]:
    """The task instance, the topology and the strategy overrides of one point."""
    if target.collective is not None:
        spec = collective_spec(target.collective)
        if "preset" in point:
            raise UsageError("--vary preset: a single collective has no presets; vary size")
        if "task" in point:
            raise UsageError("--vary task: give --task (a first task), not --collective")
    else:
        spec = _spec(str(point.get("task", target.task)))
    task_sets, topo_sets, strat = _split(point, spec)
    topo = _topology(str(point.get("topology", target.topology)),
                     tuple(sorted(topo_sets.items())))
    world = point.get("world_size")
    if world is None and target.collective is not None:
        world = min(DEFAULT_COLLECTIVE_WORLD, topo.total_gpus)
    inst = instantiate(spec, int(world) if world is not None else None,
                       str(point.get("preset", target.preset)), task_sets)
    return inst, topo, strat


def _strategy(name: str, inst: TaskInstance, strat: Mapping[str, Any], host: str) -> Strategy:
    """``name`` with the point's per-op settings; nccl_reference is PKB's reference as
    ``reference_model`` chooses it (the comparator's choice)."""
    overrides = {}
    if strat:
        ops = {op.id: dict(strat) for op in inst.ops if isinstance(op, CommOp)}
        if not ops:
            raise UsageError(f"--vary {next(iter(strat))}: task {inst.spec.key} has no comm op")
        overrides = parse_overrides(ops, "--vary")
    if name == "nccl_reference":
        return reference_model(inst, overrides, host).strategy
    return Strategy(name, overrides, host_model=host)


def evaluate(target: Target, point: Mapping[str, Any], metrics: Sequence[str]
             ) -> dict[str, Any]:
    """The metrics' columns for one point (raises PkbsimError on a bad or infeasible point)."""
    inst, topo, strat = instance(target, point)
    roof = roofline(inst, topo)
    row: dict[str, Any] = {}
    terms = {"t_comm": roof.t_comm_s, "t_mem": roof.t_mem_s, "t_comp": roof.t_comp_s,
             "t_latency": roof.t_latency_floor_s, "t_roof": roof.t_roof_s}
    times = {s: simulate(inst, topo, _strategy(s, inst, strat, target.host)).predicted_us
             for s in simulated(metrics)}
    op = next((o for o in inst.ops if isinstance(o, CommOp)), None)
    for m in metrics:
        if m == "binding":
            row["binding"] = roof.binding
        elif m in terms:
            row[f"{m}_us"] = terms[m] / US
        elif m in SIMULATED:
            row[f"{m}_us"] = times[m]
        elif m in ("algbw", "busbw") and target.collective is not None and op is not None:
            for s, t_us in times.items():
                alg, bus = algbw_busbw(op.kind, op.bytes_per_rank, inst.world_size, t_us * US)
                row[f"{s}_{m}_GBps"] = (alg if m == "algbw" else bus) / GB
        elif m == "attainment":
            for s, t_us in times.items():
                row[f"{s}_attainment"] = roof.t_roof_s / (t_us * US) if t_us > 0 else None
    if target.collective is not None and op is not None and \
            ("algbw" in metrics or "busbw" in metrics):
        line = roof.t_comm_line_rate_s
        row["line_rate_busbw_GBps"] = (algbw_busbw(op.kind, op.bytes_per_rank,
                                                   inst.world_size, line)[1] / GB
                                       if line > 0 else None)
    return row


def evaluate_or_error(target: Target, point: Mapping[str, Any], metrics: Sequence[str]
                      ) -> dict[str, Any]:
    """``evaluate``, with a bad or infeasible point as ``{"error": one line}``: a sweep goes on."""
    try:
        return evaluate(target, point, metrics)
    except PkbsimError as exc:
        return {"error": exc.one_line()}
