"""pkbsim's Python API: each command of the command line as a function (docs/python.md).

Every function takes the options of its command, as keyword arguments spelled as the flags
(``--world-size`` is ``world_size``, ``--set KEY=VALUE`` is ``sets={"KEY": VALUE}``), runs the
same core code, and returns a report holding the same frozen result object the command
renders (``.result``). ``to_dict()`` is the command's ``--format json`` document, parsed;
``to_json()`` its text; ``to_text()`` the terminal table; reports that are tables have
``to_pandas()`` too (``pip install 'pkbsim[frames]'``). Bad input raises a typed
:class:`~pkbsim.errors.PkbsimError` (TaskError, TopologyError, UsageError, ...), never
SystemExit.

Heavy modules (numpy, simpy, matplotlib) load inside the functions, so ``import pkbsim`` stays
cheap. Nothing here prints; files are written only where an argument names one (``sweep``'s
``jsonl``, ``record_trace``'s ``out``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pkbsim.bounds import check_option, show
from pkbsim.datafiles import looks_like_path
from pkbsim.errors import ArgumentError, UsageError
from pkbsim.inputs import path_kind

if TYPE_CHECKING:
    import pandas

    from pkbsim.analysis import AnalysisResult
    from pkbsim.comparator.comparison import DirectoryComparison
    from pkbsim.inspection import Inspection
    from pkbsim.overview import Overview
    from pkbsim.planning.sweep import Progress, SweepResult
    from pkbsim.roofline import Roofline
    from pkbsim.sim.result import SimResult
    from pkbsim.task.schema import TaskSpec
    from pkbsim.topology.schema import Topology
    from pkbsim.trace.launch import TraceOutcome

Sets = Mapping[str, str | int | float | bool]
DEFAULT_TOPOLOGY = "dgx-h100"  # pkbsim.topology.loader's, without importing it
FRAMES_HINT = "pip install 'pkbsim[frames]'"


# ---------------------------------------------------------------- reports


class Report:
    """What every report has: the command's JSON document, its text and its table."""

    def to_json(self) -> str:
        """The command's ``--format json`` output, byte for byte."""
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        """The command's ``--format json`` document (the JSON contract), as a dict."""
        data = json.loads(self.to_json())
        assert isinstance(data, dict)
        return data

    def to_text(self) -> str:
        """The command's terminal table (``--format table``)."""
        raise NotImplementedError


def frame(records: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None
          ) -> pandas.DataFrame:
    """``records`` as a pandas DataFrame; a UsageError with the pip hint without pandas."""
    try:
        import pandas
    except ImportError:
        raise UsageError(f"to_pandas() needs pandas: {FRAMES_HINT}") from None
    return pandas.DataFrame.from_records(list(records), columns=columns)


@dataclass(frozen=True)
class AnalysisReport(Report):
    """One task's roofline (and both strategies' simulated times): ``pkbsim analyze --task``.

    ``result``: the :class:`~pkbsim.analysis.AnalysisResult` the command renders."""

    result: AnalysisResult

    @property
    def t_roof_us(self) -> float:
        """The roofline's bound in microseconds (``roofline.t_roof_us``)."""
        from pkbsim.report.text import json_us

        return json_us(self.result.roofline.t_roof_s)

    @property
    def binding(self) -> str:
        """The term that sets the bound: comm, memory, compute or latency."""
        return self.result.roofline.binding

    def to_json(self) -> str:
        from pkbsim.report.analysis_json import render

        return render(self.result)

    def to_text(self) -> str:
        from pkbsim.report.analysis_table import analysis_table

        return analysis_table(self.result)


@dataclass(frozen=True)
class OverviewReport(Report):
    """Every shipped task's bounds, one row each: ``pkbsim analyze --all``.

    ``result``: the :class:`~pkbsim.overview.Overview` the command renders."""

    result: Overview

    def to_json(self) -> str:
        from pkbsim.report.overview_report import render_json

        return render_json(self.result)

    def to_text(self) -> str:
        from pkbsim.report.overview_report import render_table

        return render_table(self.result)

    def to_csv(self) -> str:
        """``--format csv``."""
        from pkbsim.report.overview_report import render_csv

        return render_csv(self.result)

    def to_pandas(self) -> pandas.DataFrame:
        """One row per task, the JSON rows' fields as columns."""
        return frame(self.to_dict()["rows"])


@dataclass(frozen=True)
class SimulationReport(Report):
    """One task simulated under a strategy: ``pkbsim simulate``.

    ``result``: the :class:`~pkbsim.sim.result.SimResult`; ``roofline``: the task's bounds on
    the same topology (the command reports the time over t_roof)."""

    result: SimResult
    roofline: Roofline

    @property
    def predicted_us(self) -> float:
        """The steady-state time of one iteration, in microseconds."""
        return self.result.predicted_us

    def to_json(self) -> str:
        from pkbsim.report.sim_report import render_json

        return render_json(self.result, self.roofline)

    def to_text(self) -> str:
        from pkbsim.report.sim_report import sim_table

        return sim_table(self.result, self.roofline)

    def to_pandas(self) -> pandas.DataFrame:
        """One row per op of the measured iteration: the JSON's ``ops`` (id, category, kind,
        gpu_us, host_us, start_us, end_us) with ``how`` spread into ``how_algorithm``,
        ``how_mechanism``, ``how_protocol``, ... (empty for an op with no collective)."""
        keys = ("algorithm", "mechanism", "protocol", "chunks", "pieces", "sms",
                "nccl_estimate_us")
        records = []
        for op in self.to_dict()["ops"]:
            how = op.pop("how") or {}
            records.append({**op, **{f"how_{k}": how.get(k) for k in keys}})
        columns = ["id", "category", "kind", "gpu_us", "host_us", "start_us", "end_us",
                   *(f"how_{k}" for k in keys)]
        return frame(records, columns)

    def chrome_trace(self) -> str:
        """The timeline as Chrome/Perfetto trace JSON (``--trace``; simulate with
        ``trace=True``)."""
        from pkbsim.report.trace import chrome_trace

        return chrome_trace(self.result)

    def gantt(self, fmt: str = "png") -> bytes:
        """The timeline as a Gantt chart, png, svg or pdf bytes (``--gantt``; simulate with
        ``trace=True``)."""
        from pkbsim.report.gantt import gantt_chart

        return gantt_chart(self.result, fmt)


@dataclass(frozen=True)
class SweepReport(Report):
    """Every point of a grid: ``pkbsim sweep`` (and ``simulate(collective=...)``).

    ``result``: the :class:`~pkbsim.planning.sweep.SweepResult`; ``notes``: the baseline's
    speedup summary lines (None without ``baseline=``); ``warning``: how many points failed,
    if some did."""

    result: SweepResult
    notes: tuple[str, ...] | None = None
    warning: str | None = None

    @property
    def rows(self) -> list[dict[str, Any]]:
        """Each point: its axis values, the metric columns and ``error``."""
        return list(self.to_dict()["rows"])

    def to_json(self) -> str:
        from pkbsim.report.sweep_report import render_json

        return render_json(self.result)

    def to_text(self) -> str:
        from pkbsim.report.sweep_report import render_table

        notes = "\n" + "\n".join(self.notes) + "\n" if self.notes is not None else ""
        return render_table(self.result) + notes

    def to_csv(self) -> str:
        """``--format csv``."""
        from pkbsim.report.sweep_report import render_csv

        return render_csv(self.result)

    def to_pandas(self) -> pandas.DataFrame:
        """One row per point: the axes, the metric columns and ``error``."""
        from pkbsim.report.sweep_report import fields

        return frame(self.rows, fields(self.result))

    def plot(self, x: str | None = None, y: str | None = None, fmt: str = "png") -> bytes:
        """The command's ``--plot`` (``--x``, ``--y``) as png, svg or pdf bytes."""
        from pkbsim.report import sweep_plot

        spec, cols = self.result.spec, self.result.columns
        x, y = x or sweep_plot.default_x(spec), y or sweep_plot.default_y(cols)
        sweep_plot.check_choice(spec, cols, x, y)
        return sweep_plot.sweep_plot(self.result, x, y, fmt)


@dataclass(frozen=True)
class ComparisonReport(Report):
    """Measured kernels against the roofline and the simulator: ``pkbsim compare``.

    ``result``: the :class:`~pkbsim.comparator.comparison.DirectoryComparison`."""

    result: DirectoryComparison

    def to_json(self) -> str:
        from pkbsim.report.compare_report import render_json

        return render_json(self.result)

    def to_text(self) -> str:
        from pkbsim.report.compare_report import render_table

        return render_table(self.result)

    def to_pandas(self) -> pandas.DataFrame:
        """One row per measured variant: the problem's bounds, the variant's attainment,
        speedup and largest gap cause."""
        records = []
        for problem in self.to_dict()["problems"]:
            head = {k: problem[k] for k in ("problem", "topology", "world_size", "t_roof_us",
                                            "binding")}
            head["predicted_nccl_reference_us"] = problem["predicted"]["nccl_reference_us"]
            head["predicted_custom_best_us"] = problem["predicted"]["custom_best_us"]
            for v in problem["variants"]:
                top = v["causes"][0]["name"] if v["causes"] else None
                records.append({**head, **{k: v[k] for k in (
                    "variant", "reference", "measured_us", "attainment",
                    "speedup_vs_reference", "solution", "gap_us")}, "top_cause": top})
        return frame(records)


@dataclass(frozen=True)
class InspectionReport(Report):
    """What each solution file does, read from its code: ``pkbsim inspect``.

    ``result``: the :class:`~pkbsim.inspection.Inspection` rows, one per file."""

    result: tuple[Inspection, ...]

    @property
    def failed(self) -> list[Inspection]:
        """Rows of files that could not be read or parsed (``error`` set)."""
        return [r for r in self.result if r.error is not None]

    def to_json(self) -> str:
        from pkbsim.report.inspect_report import render_json

        return render_json(list(self.result))

    def to_text(self) -> str:
        from pkbsim.report.inspect_report import render_table

        return render_table(list(self.result))


@dataclass(frozen=True)
class TraceReport:
    """What ``pkbsim trace`` did: one outcome per target and, with ``programs``, the lines of
    the reference programs it folded the traces into. ``pkbsim trace`` prints ``to_text()``
    and has no JSON output; ``to_dict()`` is this API's own summary."""

    outcomes: tuple[TraceOutcome, ...]
    folded: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        """Every target traced."""
        return all(o.status == "ok" for o in self.outcomes)

    def to_text(self) -> str:
        lines = [f"{o.target}: {o.status} ({o.seconds:.1f} s)"
                 + (f" {o.path}" if o.path else f": {o.error}") for o in self.outcomes]
        return "\n".join([*lines, *self.folded]) + "\n"

    def to_dict(self) -> dict[str, Any]:
        return {"targets": [{"target": o.target, "status": o.status, "error": o.error,
                             "seconds": o.seconds,
                             "path": str(o.path) if o.path is not None else None}
                            for o in self.outcomes],
                "folded": list(self.folded)}


# ---------------------------------------------------------------- arguments
#
# Every argument is checked here, before the core sees it: a wrong type is one ArgumentError
# naming the argument, never a TypeError or AttributeError from deep inside.

PathArg = str | os.PathLike[str]
NAME = "a name or a path (str or os.PathLike)"
TASK = "a task id, name, alias or path (str, int or os.PathLike)"
PATH = "a path (str or os.PathLike)"


def wrong(name: str, value: object, wanted: str) -> ArgumentError:
    """The error for argument ``name`` given ``value`` where ``wanted`` is taken."""
    return ArgumentError(f"expected {wanted}, got {type(value).__name__} {show(value)}",
                         field=f"argument {name}")


def _text(value: object, name: str, wanted: str = "a str") -> str:
    if not isinstance(value, str):
        raise wrong(name, value, wanted)
    return value


def _opt_text(value: object, name: str, wanted: str = "a str or None") -> str | None:
    return None if value is None else _text(value, name, wanted)


def _fspath(value: object, name: str, wanted: str) -> str:
    """A path object's text (a str one; bytes paths are refused)."""
    if isinstance(value, os.PathLike):
        text = os.fspath(value)
        if isinstance(text, str):
            return text
    raise wrong(name, value, wanted)


def _name(value: object, name: str, wanted: str = NAME) -> str:
    """A name or a path as the loaders take it; a path object is always read as a file
    (``Path("grpo")`` is the file ./grpo, not the task grpo)."""
    if isinstance(value, str):
        return value
    text = _fspath(value, name, wanted)
    return text if looks_like_path(text) else os.path.join(".", text)


def _task(value: object, name: str) -> str:
    """A task: its id may be an int (``analyze(83)``)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return _name(value, name, TASK)


def _opt_task(value: object, name: str) -> str | None:
    return None if value is None else _task(value, name)


def _file(value: object, name: str) -> Path:
    return Path(value) if isinstance(value, str) else Path(_fspath(value, name, PATH))


def _opt_file(value: object, name: str) -> Path | None:
    return None if value is None else _file(value, name)


def _flag(value: object, name: str) -> bool:
    if not isinstance(value, bool):
        raise wrong(name, value, "True or False")
    return value


def _texts(value: object, name: str) -> list[str]:
    """A sequence of str (one str alone is one item)."""
    if isinstance(value, str):
        return [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise wrong(name, value, "a list of str")
    return list(value)


def _scalar(value: object) -> bool:
    return isinstance(value, (str, int, float)) and not isinstance(value, bool)


def _mapping(value: object, name: str, values: Callable[[object], bool], wanted: str
             ) -> dict[str, Any]:
    """A mapping with str keys whose values ``values`` accepts (None: empty)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise wrong(name, value, f"a dict of {wanted} (or None)")
    for key, item in value.items():
        if not isinstance(key, str):
            raise wrong(name, key, f"str keys (a dict of {wanted})")
        if not values(item):
            raise wrong(f"{name}[{key!r}]", item, wanted)
    return dict(value)


def _sets(value: object, name: str = "sets") -> dict[str, str]:
    """``sets`` as the command line's ``--set KEY=VALUE`` text (true/false for booleans)."""
    return sets_text(_mapping(value, name, lambda v: isinstance(v, (str, int, float)),
                              "names to a number, a str or a bool"))


def _callable(value: object, name: str) -> None:
    if value is not None and not callable(value):
        raise wrong(name, value, "a function or None")


def sets_text(sets: Sets | None) -> dict[str, str]:
    """``sets`` as the command line's ``--set KEY=VALUE`` text (true/false for booleans)."""
    out: dict[str, str] = {}
    for key, value in (sets or {}).items():
        if isinstance(value, bool):
            out[key] = "true" if value else "false"
        elif isinstance(value, (str, int, float)):
            out[key] = str(value)
        else:
            raise UsageError(f"--set {key}: expected a number, a word or true/false, got "
                             f"{type(value).__name__}")
    return out


def _world_size(value: object) -> int | None:
    if value is None:
        return None
    return int(check_option(value, "world_size", "--world-size"))


# ---------------------------------------------------------------- loaders


def load_topology(name: PathArg = DEFAULT_TOPOLOGY, sets: Sets | None = None) -> Topology:
    """A topology by name (``pkbsim topo list``) or YAML path, with dotted ``sets``
    (``{"scale_up.link_bandwidth_GBps": 50}``) applied: ``pkbsim topo show``."""
    from pkbsim.analysis import split_topology_overrides
    from pkbsim.topology.loader import load_topology as load

    return load(_name(name, "name"), split_topology_overrides(_sets(sets)))


def load_task(name: PathArg | int) -> TaskSpec:
    """A task by id, name, alias (``grpo``) or YAML path: ``pkbsim tasks show``."""
    from pkbsim.task.loader import load_task as load

    return load(_task(name, "name"))


# ---------------------------------------------------------------- commands


def analyze(task: PathArg | int, *, topology: PathArg = DEFAULT_TOPOLOGY,
            world_size: int | None = None, preset: str = "pkb", sets: Sets | None = None,
            measured_us: float | None = None, predict: bool = True,
            trace_on_demand: bool = True, pkb_root: PathArg | None = None) -> AnalysisReport:
    """Roofline bounds of one task on one topology: ``pkbsim analyze --task TASK``.

    ``task``: id, name, alias or YAML path; ``sets``: task parameters and dotted topology
    fields (``--set``); ``measured_us``: a measured time to report attainment against;
    ``predict``: also simulate both strategies (``--predict/--no-predict``);
    ``trace_on_demand``, ``pkb_root``: trace PKB's reference at this instance where no shipped
    point is it (needs torch and a PKB checkout, default ``PKB_ROOT``; docs/trace.md)."""
    from pkbsim.analysis import analyze as run
    from pkbsim.trace.on_demand import on_demand

    name, topo = _task(task, "task"), _name(topology, "topology")
    w, given = _world_size(world_size), _sets(sets)
    if measured_us is not None:
        check_option(measured_us, "measured_us", "--measured-us")
    demand = on_demand(_flag(trace_on_demand, "trace_on_demand"), _opt_file(pkb_root, "pkb_root"))
    return AnalysisReport(run(name, topo, w, _text(preset, "preset"), given, measured_us,
                              _flag(predict, "predict"), demand))


def analyze_all(*, topology: PathArg = DEFAULT_TOPOLOGY, world_size: int | None = None,
                preset: str = "pkb", sets: Sets | None = None, filters: Sequence[str] = (),
                sort: str = "id", reverse: bool = False) -> OverviewReport:
    """Bounds of every shipped task, one row each: ``pkbsim analyze --all``.

    ``sets``: dotted topology fields only; ``filters``: ``KEY=VALUE`` (``--filter``, e.g.
    ``parallelism=EP``); ``sort``, ``reverse``: ``--sort``, ``--reverse``."""
    from pkbsim.analysis import split_topology_overrides
    from pkbsim.overview import overview, parse_filters
    from pkbsim.topology.loader import load_topology as load

    w, name = _world_size(world_size), _name(topology, "topology")
    parsed = parse_filters(_texts(filters, "filters"))
    topo_sets = split_topology_overrides(_sets(sets))
    return OverviewReport(overview(load(name, topo_sets), w, _text(preset, "preset"), parsed,
                                   _text(sort, "sort"), _flag(reverse, "reverse"),
                                   topology_overrides=topo_sets))


def simulate(task: PathArg | int | None = None, *, collective: str | None = None,
             size: int | float | str | None = None, strategy: PathArg = "nccl_reference",
             topology: PathArg = DEFAULT_TOPOLOGY, world_size: int | None = None,
             preset: str = "pkb", sets: Sets | None = None,
             overrides: Mapping[str, str | int] | None = None, iterations: int = 3,
             trace: bool = False, reference_model: str = "auto",
             trace_file: PathArg | None = None,
             host_model: str | None = None, trace_on_demand: bool = True,
             pkb_root: PathArg | None = None, symmetry: bool = True
             ) -> SimulationReport | SweepReport:
    """A task under a strategy: ``pkbsim simulate --task TASK`` (a :class:`SimulationReport`);
    ``trace_file``: a trace from :func:`record_trace` the reference runs (``--trace-file``;
    alone, the task is made from it); ``trace``: keep the timeline for ``chrome_trace()`` and
    ``gantt()``; ``trace_on_demand``, ``pkb_root``: as :func:`analyze`; ``symmetry`` False:
    simulate every rank, not one per class of equivalent ranks (``--no-symmetry``).

    Or one collective call alone (``collective="all_reduce"``, ``size``: bytes per rank, a
    number or ``"1MiB"``): its simulated times and nccl-tests' bandwidths as a one-point
    :class:`SweepReport`, the same as ``pkbsim sweep --collective KIND --sizes SIZE``."""
    name, kind = _opt_task(task, "task"), _opt_text(collective, "collective")
    if size is not None and not _scalar(size):
        raise wrong("size", size, "bytes per rank, a number or a str such as '1MiB'")
    strategy_name, topo = _name(strategy, "strategy"), _name(topology, "topology")
    w, given, model = _world_size(world_size), _sets(sets), _text(reference_model,
                                                                  "reference_model")
    changes = _mapping(overrides, "overrides", _scalar, "OP.KEY to a str or an int")
    check_option(iterations, "iterations", "--iterations")
    keep, trace_path = _flag(trace, "trace"), _opt_file(trace_file, "trace_file")
    host, demand = _opt_text(host_model, "host_model"), _flag(trace_on_demand, "trace_on_demand")
    root, chosen_preset = _opt_file(pkb_root, "pkb_root"), _text(preset, "preset")
    every_rank = not _flag(symmetry, "symmetry")
    if kind is not None:
        if name is not None or trace_path is not None:
            raise UsageError("give a task (or trace_file) or a collective, not both")
        if size is None:
            raise UsageError("a collective needs size= (bytes per rank, e.g. '1MiB')")
        for arg, used in (("strategy", strategy_name != "nccl_reference"),
                          ("overrides", bool(changes)), ("trace", keep),
                          ("iterations", iterations != 3), ("reference_model", model != "auto"),
                          ("symmetry", every_rank)):
            if used:
                raise UsageError(f"{arg}= works with a task; a collective runs both "
                                 "strategies (vary algorithm, mechanism, ... with sweep())")
        return sweep(collective=kind, sizes=str(size), topology=topo, world_size=w, sets=sets,
                     host_model=host, jobs=1)
    if host is not None:
        raise UsageError("host_model= works with a collective; a task's strategy file sets it")
    from pkbsim.roofline import roofline
    from pkbsim.sim.run import run_simulation
    from pkbsim.trace.on_demand import on_demand

    result = run_simulation(name, strategy_name, topo, w, chosen_preset, given,
                            {k: str(v) for k, v in changes.items()}, int(iterations),
                            trace=keep, reference_model=model,
                            trace_file=str(trace_path) if trace_path is not None else None,
                            on_demand=on_demand(demand, root), symmetry=not every_rank)
    return SimulationReport(result, roofline(result.instance, result.topology))


def sweep(task: PathArg | int | None = None, *, collective: str | None = None,
          vary: Mapping[str, str | Sequence[str | int | float]] | None = None,
          sizes: str | None = None, topology: PathArg = DEFAULT_TOPOLOGY,
          world_size: int | None = None, preset: str = "pkb", sets: Sets | None = None,
          metrics: Sequence[str] = (), host_model: str | None = None,
          baseline: str | None = None, jsonl: PathArg | None = None,
          fresh: bool = False, jobs: int | None = None, executor: str = "local",
          scheduler: str | None = None, progress: Progress | None = None) -> SweepReport:
    """A task or one collective over a grid: ``pkbsim sweep``.

    ``vary``: axis name to values, a list (``[2, 4, 8]``) or the command's text
    (``"1KiB:1GiB:x2"``), in order, the last fastest (``--vary``); ``sizes``: a collective's
    sizes (``--sizes``); ``sets``: values fixed for every point; ``metrics``: ``--metric``;
    ``baseline``: ``"AXIS=VALUE"``, adds speedup columns; ``jsonl``: stream finished points to
    this file and resume from it (``--jsonl``, ``--fresh``); ``jobs``: worker processes
    (default: every core; 1 runs in this process); ``executor``, ``scheduler``: ``local`` or
    ``dask`` (without a scheduler, a LocalCluster whose workers import the main script: in a
    script, call this under ``if __name__ == "__main__":``); ``progress``: called with
    (finished, total). Every point failing is an InfeasibleError; some failing sets
    ``warning``."""
    from pkbsim.planning.request import default_workers, failures, runner_for, sweep_spec
    from pkbsim.planning.sweep import run_sweep

    axes = _mapping(vary, "vary", _axis_values, "axis names to a str or a list of values")
    items = [f"{name}={_values_text(values)}" for name, values in axes.items()]
    fixed = [f"{k}={v}" for k, v in _sets(sets).items()]
    if jobs is not None:
        check_option(jobs, "jobs", "--jobs")
    w, name, topo = _world_size(world_size), _opt_task(task, "task"), _name(topology, "topology")
    spec = sweep_spec(name, _opt_text(collective, "collective"), topo, _text(preset, "preset"),
                      _opt_text(host_model, "host_model"), items, _opt_text(sizes, "sizes"),
                      w, fixed, _texts(metrics, "metrics"))
    base: tuple[str, Any] | None = None
    if baseline is not None:
        from pkbsim.planning.baseline import parse_baseline

        base = parse_baseline(_text(baseline, "baseline"), {a.name: a.values for a in spec.axes})
    workers = default_workers(None if jobs is None else int(jobs), spec)
    stream, restart = _opt_file(jsonl, "jsonl"), _flag(fresh, "fresh")
    _callable(progress, "progress")
    with runner_for(_text(executor, "executor"), _opt_text(scheduler, "scheduler"),
                    None if jobs is None else int(jobs), workers) as runner:
        result = run_sweep(spec, stream, workers, progress, restart, runner)
    warning = failures(result)
    notes: tuple[str, ...] | None = None
    if base is not None:
        from pkbsim.planning.baseline import speedup_summary, with_speedups

        result = with_speedups(result, *base)
        notes = tuple(speedup_summary(result, *base))
    return SweepReport(result, notes, warning)


def _axis_values(values: object) -> bool:
    """An axis's values: the command's text, or a list of numbers and str."""
    return isinstance(values, str) or (isinstance(values, (list, tuple)) and bool(values)
                                       and all(_scalar(v) for v in values))


def _values_text(values: str | Sequence[str | int | float]) -> str:
    if isinstance(values, str):
        return values
    return ",".join(str(v) for v in values)


def compare(problem: str | int | None = None, *, measured: PathArg | None = None,
            measured_us: float | None = None, solution: PathArg | None = None,
            solutions: PathArg | None = None, topology: PathArg = DEFAULT_TOPOLOGY,
            world_size: int | None = None, preset: str = "pkb", simulate_fixes: bool = True,
            trace_on_demand: bool = True, pkb_root: PathArg | None = None,
            measured_trace: PathArg | None = None, call_marker: str | None = None
            ) -> ComparisonReport:
    """Measured kernels against the roofline and the simulator, the gap split into ranked
    causes: ``pkbsim compare``.

    ``measured``: a PKB logs folder or CSV; or ``problem`` with ``measured_us``; ``solution``
    (one file, with ``problem``) or ``solutions`` (a folder): the candidates, inspected for the
    causes; ``simulate_fixes``: also simulate the time after each fix (slower);
    ``trace_on_demand``, ``pkb_root``: as :func:`analyze`; ``measured_trace``: PyTorch
    profiler (Kineto) traces, a file or a folder, whose calls are split into terms beside the
    model's (they give the measured times where ``measured`` and ``measured_us`` are absent);
    ``call_marker``: the range that is one call where a trace has no ``ProfilerStep``."""
    from pkbsim.comparator.comparison import compare_measured
    from pkbsim.topology.loader import load_topology as load
    from pkbsim.trace.on_demand import on_demand

    name = None if problem is None else _task(problem, "problem")
    paths = {arg: _opt_file(value, arg) for arg, value in (
        ("measured", measured), ("solution", solution), ("solutions", solutions),
        ("measured_trace", measured_trace))}
    if measured_us is not None:
        check_option(measured_us, "measured_us", "--measured-us")
    marker = None if call_marker is None else _text(call_marker, "call_marker")
    w, topo, fixes = _world_size(world_size), _name(topology, "topology"), _flag(
        simulate_fixes, "simulate_fixes")
    demand = on_demand(_flag(trace_on_demand, "trace_on_demand"), _opt_file(pkb_root, "pkb_root"))
    check_compare(name, paths["measured"], measured_us, paths["solution"], paths["solutions"],
                  paths["measured_trace"])
    return ComparisonReport(compare_measured(
        name, paths["measured"], measured_us, paths["solution"], paths["solutions"],
        load(topo), w, _text(preset, "preset"), fixes, demand, paths["measured_trace"], marker))


def check_compare(problem: str | None, measured: Path | None, measured_us: float | None,
                  solution: Path | None, solutions: Path | None,
                  measured_trace: Path | None = None) -> None:
    """The combinations ``pkbsim compare`` accepts, or a UsageError."""
    if measured is not None and measured_us is not None:
        raise UsageError("give either --measured LOGS|CSV or --measured-us TIME, not both")
    if measured is None and measured_us is None and measured_trace is None:
        raise UsageError("give --measured LOGS|CSV, --measured-us TIME or --measured-trace "
                         "FILE|DIR")
    if measured_us is not None and problem is None:
        raise UsageError("--measured-us needs --problem")
    if solution is not None and problem is None:
        raise UsageError("--solution needs --problem (a directory takes --solutions DIR)")
    if solution is not None and solutions is not None:
        raise UsageError("give --solution FILE or --solutions DIR, not both")
    if solutions is not None and path_kind(solutions.expanduser(),
                                           name=f"--solutions {solutions}") != "folder":
        raise UsageError("--solutions: not a directory", file=str(solutions))


def inspect(*paths: PathArg, dtype: str = "bfloat16", world_size: int = 8,
            shape: str | Sequence[int] = "1024x1024",
            run_log: PathArg | None = None) -> InspectionReport:
    """What each solution file (or every ``*.py`` under a folder) does, read from its code:
    ``pkbsim inspect PATH...``. The branches are read under ``dtype``, ``world_size`` and
    ``shape`` (PKB's profile by default); ``run_log``: a ``pkbsim run`` output folder whose
    profiler records are reconciled with the static findings (``--run-log``). A folder's
    unreadable file is a row with ``error`` (see ``failed``); a lone one raises."""
    import re

    from pkbsim.inspection import inspect_paths
    from pkbsim.inspection.profile import Profile

    files = [_file(path, "paths") for path in paths]
    if isinstance(shape, (list, tuple)) and all(isinstance(n, int) and not isinstance(n, bool)
                                                for n in shape):
        text = "x".join(str(n) for n in shape)
    else:
        text = _text(shape, "shape", "a str such as '1024x1024' or a list of int")
    if not re.fullmatch(r"\d{1,9}(?:x\d{1,9}){0,7}", text):
        raise UsageError(f"--shape {text}: expected sizes joined by x, e.g. 1024x1024")
    w = int(check_option(world_size, "world_size", "--world-size"))
    name, log = _text(dtype, "dtype"), _opt_file(run_log, "run_log")
    try:
        profile = Profile(dtype=name, world_size=w, shape=tuple(int(s) for s in text.split("x")))
    except ValueError as exc:
        raise UsageError(f"--dtype {name}: {exc}" if "dtype" in str(exc) else str(exc)) \
            from None
    if not files:
        raise UsageError("give at least one solution file or folder")
    profiles = None
    if log is not None:
        from pkbsim.timeline.run_log import load_run_log

        profiles = load_run_log(log.expanduser())
    rows = inspect_paths(files, profile)
    if profiles is not None:
        from pkbsim.inspection.reconcile import profiles_for, reconcile

        rows = [reconcile(row, profiles_for(row.file, profiles)) for row in rows]
    return InspectionReport(tuple(rows))


def record_trace(target: str | None = None, *, pkb_root: PathArg | None = None,
                 task: str | int | None = None, world_size: int = 1, sets: Sets | None = None,
                 inputs: str = "make_inputs", mode: str = "auto", timeout: float = 300.0,
                 out: PathArg = "traces", programs: PathArg | None = None,
                 commit: Callable[[Path], str] | None = None, rank: int = 0) -> TraceReport:
    """Record what PyTorch dispatches, on CPU, for ``target`` (``"FILE.py:FUNCTION"``, with
    ``FILE.py`` defining ``inputs``) or PKB's references (``pkb_root`` and ``task``: ids or
    names, comma-separated, or ``all``): ``pkbsim trace``. One JSON per target under ``out``;
    ``programs``: also fold them into reference programs there. Feed a trace to
    ``simulate(trace_file=...)``. ``commit``: how to read the PKB checkout's commit; ``rank``:
    the rank recorded (negative counts from the last: -1 is W - 1)."""
    from pkbsim.bounds import check_int, parse_number
    from pkbsim.trace.launch import MODES, TraceJob, check_out_folder, run_trace

    function, root = _opt_text(target, "target", "'FILE.py:FUNCTION' or None"), _opt_file(
        pkb_root, "pkb_root")
    names = None if task is None else _task(task, "task")
    chosen, entry = _text(mode, "mode"), _text(inputs, "inputs")
    folder, fold_to = _file(out, "out"), _opt_file(programs, "programs")
    _callable(commit, "commit")
    if chosen not in MODES:
        raise UsageError(f"--mode {chosen!r}: expected one of {', '.join(MODES)}")
    w = int(check_option(world_size, "world_size", "--world-size"))
    seconds = check_option(timeout, "seconds", "--timeout")
    if isinstance(rank, bool) or not isinstance(rank, int) or not -w <= rank < w:
        raise UsageError(f"--rank {show(rank)}: expected a rank of the {w} traced "
                         "(negative counts from the last)")
    rank %= w
    given = _sets(sets)
    if (function is None) == (root is None):
        raise UsageError("give FILE.py:FUNCTION or --pkb-root (with --task), not both")
    if root is not None:
        problems = _problems(names)
        unknown = sorted(set(given) - {"M", "N"})
        if unknown:
            raise UsageError(f"--set {unknown[0]}: PKB's inputs take M and N (its --m, --n)")
        rows, cols = (check_int(parse_number(given.get(k, "1024"), field=f"--set {k}"), "whole",
                                field=f"--set {k}") for k in ("M", "N"))
        job = TraceJob(w, folder, root, problems, rows, cols, commit(root) if commit else "",
                       timeout_s=seconds, mode=chosen, rank=rank)
    else:
        assert function is not None
        job = TraceJob(w, folder, function=function, inputs=entry,
                       sets=tuple(f"{k}={v}" for k, v in given.items()), timeout_s=seconds,
                       mode=chosen, rank=rank)
    if fold_to is not None:
        check_out_folder(fold_to, "--programs")
    outcomes = tuple(run_trace(job))
    folded: list[str] = []
    if fold_to is not None:
        from pkbsim.trace.fold import fold_into

        folded = list(fold_into(fold_to, [o.path for o in outcomes if o.path],
                                names if function else None))
    return TraceReport(outcomes, tuple(folded))


def _problems(task: str | None) -> tuple[int, ...]:
    if not task:
        raise UsageError("--pkb-root needs --task (ids or names, comma-separated, or all)")
    if task.strip() == "all":
        return ()  # every reference in the checkout
    from pkbsim.task.loader import load_task as load

    return tuple(load(name.strip()).id for name in task.split(",") if name.strip())
