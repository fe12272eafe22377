"""Measured kernels against the roofline, the simulator and their causes.

Pure: task instances, a topology, measurements and inspections in; :class:`Comparison` (one
problem) and :class:`DirectoryComparison` (every problem of a logs folder) out.
:func:`compare_measured` loads what ``pkbsim compare`` names (a logs folder or CSV, or one
measured time, and solution files); pkbsim.report.compare_report renders the result.

Per variant: attainment = t_roof / measured, speedup = reference measured / variant measured,
and the gap ``measured - t_roof`` split into ranked causes by pkbsim.comparator.gap.decompose
(the reference is described by ``reference_inspection``; a candidate by its solution file's
inspection, else none, so its whole gap is residual). One model of PKB's reference per problem
(pkbsim.comparator.reference.reference_model: the traced program, else the task file's ops)
gives the predicted nccl_reference time, the reference's inspection, every what-if that starts
from the reference and the timeline.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pkbsim.comparator.gap import Gap, decompose, reference_inspection
from pkbsim.comparator.reference import ReferenceModel, reference_model
from pkbsim.comparator.timelines import (
    TimelineComparison,
    compare_timelines,
    load_traces,
    measurement_of,
)
from pkbsim.errors import PkbsimError, UsageError
from pkbsim.inspection import Inspection, inspect_file
from pkbsim.inspection.profile import Profile
from pkbsim.inspection.reconcile import reconcile
from pkbsim.pkb.logs import MeasuredSet, Measurement, from_value, load_measured
from pkbsim.task.loader import find_task, instantiate, load_task
from pkbsim.task.schema import TaskInstance
from pkbsim.timeline.breakdown import Breakdown, TimelineBreakdown
from pkbsim.timeline.breakdown import decompose as split_timeline
from pkbsim.timeline.model import model_timeline
from pkbsim.timeline.run_log import load_run_log
from pkbsim.topology.schema import Topology

if TYPE_CHECKING:
    from pkbsim.sim.result import SimResult
    from pkbsim.trace.on_demand import OnDemand
    from pkbsim.trace.store import ChosenProgram

NOT_INSPECTED = "(not inspected)"
REFERENCE_GROUP = "(reference: eager PyTorch + NCCL)"


@dataclass(frozen=True)
class VariantResult:
    """One measured variant (the reference or a candidate) of one problem."""

    variant: str
    measured_us: float
    attainment: float  # t_roof / measured
    speedup_vs_reference: float | None  # reference measured / this measured
    solution: str | None  # the inspected file (the reference: None)
    mechanisms: tuple[str, ...] | None  # None: not inspected
    gap: Gap

    @property
    def is_reference(self) -> bool:
        return self.variant == "reference"


@dataclass(frozen=True)
class Comparison:
    problem: str  # task key
    topology: str
    world_size: int
    t_roof_us: float
    binding: str
    predicted_nccl_reference_us: float
    predicted_custom_best_us: float
    reference: VariantResult | None
    candidates: tuple[VariantResult, ...]
    reference_model: ReferenceModel  # what every nccl_reference time of this problem ran
    timelines: tuple[TimelineComparison, ...] = ()  # measured traces beside the model

    @property
    def variants(self) -> tuple[VariantResult, ...]:
        return ((self.reference,) if self.reference else ()) + self.candidates


@dataclass(frozen=True)
class ProblemError:
    """A problem of a logs folder that could not be compared (the others still are)."""

    problem: str
    error: str


@dataclass(frozen=True)
class MechanismSummary:
    mechanism: str  # a vocabulary mechanism, NOT_INSPECTED or REFERENCE_GROUP
    variants: int
    median_attainment: float


@dataclass(frozen=True)
class DirectoryComparison:
    source: str
    topology: str
    comparisons: tuple[Comparison, ...]
    errors: tuple[ProblemError, ...] = ()

    @property
    def summary(self) -> tuple[MechanismSummary, ...]:
        return summarize(self.comparisons)


# ---------------------------------------------------------------- building

def compare_problem(inst: TaskInstance, topo: Topology, measurements: Sequence[Measurement],
                    inspections: Mapping[str, Inspection] | None = None, *,
                    simulate_fixes: bool = True, program: ChosenProgram | None = None
                    ) -> Comparison:
    """One problem: ``measurements`` of its variants, ``inspections`` by variant name;
    ``program``: the one PKB's reference runs (None: the shipped points' choice)."""
    if not measurements:
        raise UsageError(f"no measured time for problem {inst.spec.key}")
    inspections = inspections or {}
    ref = next((m for m in measurements if m.is_reference), None)
    model = reference_model(inst, program=program)
    results = []
    for m in measurements:
        found = inspections.get(m.variant)
        if m.is_reference:
            mapping: Mapping[str, Any] | None = reference_inspection(inst, model)
        else:
            mapping = dataclasses.asdict(found) if found is not None else None
        gap = decompose(inst, topo, m.time_s, mapping, simulate_fixes=simulate_fixes,
                        reference=model)
        mechs = (tuple(mapping["mechanisms"]) if m.is_reference and mapping is not None else
                 found.mechanisms if found is not None and found.error is None else None)
        results.append(VariantResult(
            m.variant, m.time_us, gap.attainment,
            ref.time_us / m.time_us if ref is not None else None,
            found.file if found is not None and not m.is_reference else None, mechs, gap))
    first = results[0].gap
    reference = next((r for r in results if r.is_reference), None)
    return Comparison(
        inst.spec.key, topo.name, inst.world_size, first.t_roof_us, first.binding,
        first.predicted_nccl_reference_us, first.predicted_custom_best_us, reference,
        tuple(r for r in results if not r.is_reference), model)


def summarize(comparisons: Sequence[Comparison]) -> tuple[MechanismSummary, ...]:
    """Median attainment per inspected mechanism (a candidate counts under each it uses), of
    the candidates not inspected, and of the references."""
    groups: dict[str, list[float]] = {}
    for c in comparisons:
        for v in c.variants:
            if v.is_reference:
                keys: Sequence[str] = (REFERENCE_GROUP,)
            elif v.mechanisms is None:
                keys = (NOT_INSPECTED,)
            else:
                keys = v.mechanisms or ("(no mechanism found)",)
            for key in keys:
                groups.setdefault(key, []).append(v.attainment)
    return tuple(MechanismSummary(k, len(vals), statistics.median(vals))
                 for k, vals in sorted(groups.items()))

# ---------------------------------------------------------------- from files

def compare_measured(problem: str | None, measured: Path | None, measured_us: float | None,
                     solution: Path | None, solutions: Path | None, topo: Topology,
                     world_size: int | None, preset: str, simulate_fixes: bool = True,
                     on_demand: OnDemand | None = None, measured_trace: Path | None = None,
                     call_marker: str | None = None) -> DirectoryComparison:
    """One problem (``problem`` with ``measured_us`` or a ``measured`` logs folder or CSV, and
    optionally its candidate's ``solution``), or every problem of ``measured`` (``solutions``
    holding ``<problem stem>_<backend>.py``). In a folder, a problem that cannot be compared
    (a world size its task refuses, ...) becomes an error row; the others are still compared.
    ``on_demand``: trace the reference at an instance no shipped point is (docs/trace.md).
    ``measured_trace``: Kineto traces (a file or folder) whose calls are split into terms
    beside the model's; without ``measured`` or ``measured_us`` they give the measured times."""
    traces = _traces(measured_trace, problem, call_marker)
    if measured is not None and measured_us is not None:
        raise UsageError("give either --measured LOGS|CSV or --measured-us TIME")
    if measured is None and measured_us is None and not traces:
        raise UsageError("give --measured LOGS|CSV, --measured-us TIME or --measured-trace "
                         "FILE|DIR")
    if problem is not None:
        return _one_problem(problem, measured, measured_us, solution, solutions, topo,
                            world_size, preset, simulate_fixes, on_demand, traces)
    if measured_us is not None:
        raise UsageError("--measured-us needs --problem")
    data = load_measured(measured) if measured is not None else _from_traces(
        traces, str(measured_trace))
    return _directory(data, solutions, topo, world_size, preset, simulate_fixes, measured,
                      on_demand, traces)


Traces = dict[tuple[str | None, str], list[TimelineBreakdown]]


def _traces(path: Path | None, problem: str | None, marker: str | None) -> Traces:
    if path is None:
        return {}
    key = find_task(problem).stem if problem is not None else None
    found = load_traces(path, key, marker)
    if any(k[0] is None for k in found):
        raise UsageError("a trace outside PKB's layout (logs/problem_<stem>/<backend>/...): "
                         "name its problem with --problem", file=str(path))
    return found


def _from_traces(traces: Traces, source: str) -> MeasuredSet:
    items = [measurement_of(p, v, tls) for (p, v), tls in traces.items() if p is not None]
    return MeasuredSet(tuple(items), source)


def _trace_measurements(traces: Traces, problem: str) -> list[Measurement]:
    return [measurement_of(p, v, tls) for (p, v), tls in traces.items() if p == problem]


def reference_timeline(comp: Comparison, topo: Topology) -> SimResult:
    """The simulator's timeline of PKB's reference for this problem: the model its predicted
    time ran (``comp.reference_model``), with every flow kept."""
    from pkbsim.sim import SimOptions

    return comp.reference_model.simulate(topo, SimOptions(trace=True))


def _one_problem(problem: str, measured: Path | None, measured_us: float | None,
                 solution: Path | None, solutions: Path | None, topo: Topology,
                 world_size: int | None, preset: str, simulate_fixes: bool,
                 on_demand: OnDemand | None, traces: Traces | None = None) -> DirectoryComparison:
    traces = traces or {}
    if measured_us is not None:
        found = [from_value(measured_us, problem)]
        source = "--measured-us"
    elif measured is not None:
        data = load_measured(measured)
        found = data.for_problem(problem)
        source = data.source
        if not found:
            raise UsageError(f"no measured times for problem {problem!r} (it has "
                             f"{', '.join(data.problems())})", file=str(measured))
    else:
        key = find_task(problem).stem
        found = _trace_measurements(traces, key)
        source = "--measured-trace"
        if not found:
            raise UsageError(f"no trace of problem {problem!r} (the traces are of "
                             f"{', '.join(sorted({str(k[0]) for k in traces}))})")
    inspections = _solution_for(found, solution, world_size) if solution is not None else (
        _from_folder(found, solutions, world_size) if solutions is not None else {})
    inspections = _reconciled(inspections, found, measured)
    comparison = _compare(found, inspections, topo, world_size, preset, simulate_fixes,
                          on_demand, traces)
    return DirectoryComparison(source, topo.name, (comparison,))


def _directory(data: MeasuredSet, solutions: Path | None, topo: Topology,
               world_size: int | None, preset: str, simulate_fixes: bool,
               measured: Path | None = None, on_demand: OnDemand | None = None,
               traces: Traces | None = None) -> DirectoryComparison:
    done: list[Comparison] = []
    errors: list[ProblemError] = []
    for problem in data.problems():
        found = data.for_problem(problem)
        try:
            inspections = _from_folder(found, solutions, world_size) if solutions is not None \
                else {}
            inspections = _reconciled(inspections, found, measured)
            done.append(_compare(found, inspections, topo, world_size, preset,
                                 simulate_fixes, on_demand, traces))
        except PkbsimError as exc:
            errors.append(ProblemError(problem, exc.one_line()))
    if not done:
        raise UsageError("no problem could be compared: " + "; ".join(
            f"{e.problem}: {e.error}" for e in errors), file=data.source)
    return DirectoryComparison(data.source, topo.name, tuple(done), tuple(errors))


def _compare(found: list[Measurement], inspections: Mapping[str, Inspection], topo: Topology,
             world_size: int | None, preset: str, simulate_fixes: bool,
             on_demand: OnDemand | None = None, traces: Traces | None = None) -> Comparison:
    """The task at ``world_size``, else at the ranks measured, else at the preset's."""
    ranks = next((m.world_size for m in found if m.world_size is not None), None)
    w = world_size if world_size is not None else ranks
    inst = instantiate(load_task(found[0].problem), w, preset)
    program = None
    if on_demand is not None:
        from pkbsim.trace.on_demand import reference_for

        program = reference_for(inst, on_demand)
    comp = compare_problem(inst, topo, found, inspections, simulate_fixes=simulate_fixes,
                           program=program)
    mine = {v: tls for (p, v), tls in (traces or {}).items() if p == inst.spec.key}
    if not mine:
        return comp
    return dataclasses.replace(comp, timelines=timeline_comparisons(comp, topo, mine))


def timeline_comparisons(comp: Comparison, topo: Topology,
                         traces: Mapping[str, Sequence[TimelineBreakdown]]
                         ) -> tuple[TimelineComparison, ...]:
    """Each variant's traces split into terms, beside the model's split: the reference's
    ``nccl_reference`` on the problem's reference model, a candidate's ``custom_best``."""
    out = []
    models: dict[bool, tuple[Breakdown | None, str]] = {}
    timed = {v.variant: v.measured_us for v in comp.variants}
    for variant in sorted(traces, key=lambda v: (v != "reference", v)):
        ref = variant == "reference"
        if ref not in models:
            models[ref] = _model_breakdown(comp, topo, ref)
        model, label = models[ref]
        out.append(compare_timelines(variant, traces[variant], model, label,
                                     timed.get(variant)))
    return tuple(out)


def _model_breakdown(comp: Comparison, topo: Topology, reference: bool
                     ) -> tuple[Breakdown | None, str]:
    from pkbsim.sim import simulate
    from pkbsim.sim.run import load_strategy

    model = comp.reference_model
    if reference:
        result = model.simulate(topo)
        program = model.program.program if model.program is not None else None
        label = f"nccl_reference ({model.label})"
    else:
        result = simulate(model.inst, topo, load_strategy("custom_best"))
        program = None
        label = "custom_best (the best custom kernel for the task's ops)"
    return split_timeline(model_timeline(result, program)).mean, label


def _profile(found: list[Measurement], world_size: int | None) -> Profile:
    """The inspection's profile: PKB's, at the ranks compared (else measured, else 8)."""
    ranks = world_size or next((m.world_size for m in found if m.world_size), None)
    return Profile(world_size=ranks) if ranks else Profile()


def _reconciled(inspections: dict[str, Inspection], found: list[Measurement],
                measured: Path | None) -> dict[str, Inspection]:
    """Each inspected candidate checked against the profiler records ``pkbsim run`` left
    next to its measured times (``rank_<r>_profile.json``), when there are any."""
    if not inspections or measured is None or not measured.expanduser().is_dir():
        return inspections
    folder = measured.expanduser()
    if not any(folder.rglob("rank_*_profile.json")) and not any(folder.rglob("*trace*.json*")):
        return inspections
    profiles = load_run_log(folder)
    problem = found[0].problem
    return {variant: reconcile(row, [p for p in profiles if p.problem == problem
                                     and p.backend == variant and p.variant != "reference"])
            for variant, row in inspections.items()}


def _solution_for(found: list[Measurement], solution: Path, world_size: int | None
                  ) -> dict[str, Inspection]:
    """``--solution``: the one candidate's, or the candidate named by the file's suffix."""
    candidates = [m for m in found if not m.is_reference]
    if not candidates:
        raise UsageError("--solution given but only the reference was measured",
                         file=str(solution))
    if len(candidates) == 1:
        return {candidates[0].variant: inspect_file(solution, _profile(found, world_size))}
    stem = solution.stem
    named = [m for m in candidates if stem.endswith(f"_{m.variant}")]
    if not named:
        raise UsageError("several candidates measured (" + ", ".join(
            m.variant for m in candidates) + "): name the file <problem>_<backend>.py",
            file=str(solution))
    return {named[0].variant: inspect_file(solution, _profile(found, world_size))}


def _from_folder(found: list[Measurement], folder: Path, world_size: int | None
                 ) -> dict[str, Inspection]:
    """``<problem stem>_<backend>.py`` in ``folder`` for each candidate that has one."""
    out = {}
    for m in found:
        path = folder.expanduser() / f"{m.problem}_{m.variant}.py"
        if not m.is_reference and path.is_file():
            out[m.variant] = inspect_file(path, _profile(found, world_size))
    return out
