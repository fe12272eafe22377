"""The analyzer's entry point: data files in, one :class:`AnalysisResult` out. No printing."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pkbsim.bounds import check_option, parse_number
from pkbsim.errors import UsageError
from pkbsim.roofline import Roofline, roofline
from pkbsim.task.loader import instantiate, load_task
from pkbsim.task.schema import TaskInstance, TaskSpec
from pkbsim.topology.loader import DEFAULT_TOPOLOGY, load_topology
from pkbsim.topology.schema import Topology
from pkbsim.units import US

if TYPE_CHECKING:
    from pkbsim.sim.result import SimResult
    from pkbsim.trace.on_demand import OnDemand


@dataclass(frozen=True)
class AnalysisResult:
    instance: TaskInstance
    topology: Topology
    roofline: Roofline
    measured_us: float | None
    topology_overrides: dict[str, object]
    predictions: dict[str, SimResult] = field(default_factory=dict, hash=False)

    @property
    def attainment(self) -> float | None:
        """t_roof / measured: 1.0 means the measured kernel sits on the roofline."""
        if self.measured_us is None:
            return None
        return self.roofline.t_roof_s / (self.measured_us * US)


def split_overrides(sets: Mapping[str, str], spec: TaskSpec
                    ) -> tuple[dict[str, float | int], dict[str, object]]:
    """``--set`` pairs: dotted keys go to the topology, plain keys to the task."""
    task: dict[str, float | int] = {}
    topo: dict[str, object] = {}
    for key, text in sets.items():
        if "." in key:
            topo[key] = _topology_value(key, text)
            continue
        task[key] = parse_number(text, field=f"--set {key}")
    return task, topo  # instantiate() rejects unknown task keys


def split_topology_overrides(sets: Mapping[str, str]) -> dict[str, object]:
    """``--set`` for many tasks at once: only dotted (topology) keys make sense."""
    plain = [k for k in sets if "." not in k]
    if plain:
        raise UsageError(f"--set {plain[0]}: task keys differ by task; with --all only dotted "
                         "topology keys are allowed (e.g. scale_up.link_bandwidth_GBps=900)")
    return {key: _topology_value(key, text) for key, text in sets.items()}


def _topology_value(key: str, text: str) -> object:
    """true/false, a number (checked by the field's range when the topology loads), or text
    (the field's own type check names it)."""
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    try:
        return parse_number(text, field=f"--set {key}")
    except UsageError:
        if lowered.lstrip("+-") in ("nan", "inf", "infinity") or text.strip()[:1].isdigit():
            raise
        return text


def analyze(task: str, topology: str = DEFAULT_TOPOLOGY, world_size: int | None = None,
            preset: str = "pkb", sets: Mapping[str, str] | None = None,
            measured_us: float | None = None, predict: bool = False,
            on_demand: OnDemand | None = None) -> AnalysisResult:
    """The roofline; with ``predict``, also both strategies' simulated times. ``on_demand``:
    trace the reference at this instance where no shipped point is it (pkbsim.trace.on_demand;
    None: the shipped points only)."""
    spec = load_task(task)
    task_sets, topo_sets = split_overrides(sets or {}, spec)
    topo = load_topology(topology, topo_sets)
    inst = instantiate(spec, world_size, preset, task_sets)
    if measured_us is not None:
        check_option(measured_us, "measured_us", "--measured-us")
    if predict:  # refused before any work, not after the first strategy's
        from pkbsim.sim import STRATEGIES, Strategy, check_standalone_calls, simulate

        for name in STRATEGIES:
            check_standalone_calls(inst, Strategy(name))
    bounds = roofline(inst, topo)
    predictions: dict[str, SimResult] = {}
    if predict:
        program = None
        if on_demand is not None:
            from pkbsim.sim import trace_stands_for
            from pkbsim.trace.on_demand import reference_for

            program = reference_for(inst, on_demand)
            if program is not None and not trace_stands_for(program, inst):
                program = None  # the task file's ops (simulate's auto choice)
        predictions = {name: simulate(inst, topo, Strategy(
            name, program=program if name == "nccl_reference" else None))
            for name in STRATEGIES}
    return AnalysisResult(inst, topo, bounds, measured_us, topo_sets, predictions)

