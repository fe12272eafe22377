"""The simulator's entry point: data files and a strategy in, one :class:`SimResult` out.

Like :func:`pkbsim.analysis.analyze`, it loads, instantiates and computes; it never prints.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pkbsim.analysis import split_overrides
from pkbsim.bounds import check_option
from pkbsim.datafiles import looks_like_path
from pkbsim.errors import UsageError
from pkbsim.fields import Fields, load_yaml
from pkbsim.inputs import path_kind
from pkbsim.sim import SimOptions, SimResult, simulate, trace_stands_for
from pkbsim.sim.strategies import (
    REFERENCE_MODELS,
    STRATEGIES,
    OpOverride,
    Strategy,
    parse_overrides,
)
from pkbsim.task.loader import instantiate, load_task
from pkbsim.topology.loader import DEFAULT_TOPOLOGY, load_topology

if TYPE_CHECKING:
    from pkbsim.trace.on_demand import OnDemand


def load_strategy(name: str, overrides: Mapping[str, str] | None = None) -> Strategy:
    """A built-in strategy name or a strategy file, plus ``--override OP.KEY=VALUE`` pairs."""
    if name in STRATEGIES:
        strategy = Strategy(name)
    elif looks_like_path(name):
        strategy = _strategy_file(Path(name))
    else:
        raise UsageError(f"unknown strategy {name!r}; expected {', '.join(STRATEGIES)} or a "
                         "strategy file (.yaml)")
    if overrides:
        nested: dict[str, dict[str, str]] = {}
        for dotted, value in overrides.items():
            op_id, sep, key = dotted.partition(".")
            if not sep or not op_id or not key:
                raise UsageError(f"--override {dotted}={value}: expected OP.KEY=VALUE, e.g. "
                                 "a2a_logits.mechanism=tma")
            nested.setdefault(op_id, {})[key] = value
        merged: dict[str, OpOverride] = dict(strategy.overrides)
        for op_id, ov in parse_overrides(nested).items():
            given = {k: v for k, v in vars(ov).items() if v is not None}
            merged[op_id] = replace(merged.get(op_id, OpOverride()), **given)
        strategy = Strategy(strategy.name, merged, strategy.chunks, strategy.source)
    return strategy


def _strategy_file(path: Path) -> Strategy:
    """``base: custom_best`` (or nccl_reference), optional ``chunks: N``, and ``ops:`` with
    per-op mechanism, algorithm, protocol, chunks and sms."""
    kind = path_kind(path)
    if kind != "file":
        raise UsageError("no such file" if kind == "missing" else "not a regular file",
                         file=str(path))
    data, _sha = load_yaml(path, UsageError)
    f = Fields(data, str(path), "", UsageError)
    base = f.text("base", choices=STRATEGIES)
    chunks = f.integer("chunks", lo=1) if f.has("chunks") else None
    f.raw("chunks", None)
    ops: dict[str, Any] = {}
    for op_id, value in f.items("ops"):
        if not isinstance(value, Mapping):
            raise f.fail(f"ops.{op_id}", "expected a mapping of mechanism, algorithm, "
                         "protocol, chunks, sms")
        ops[str(op_id)] = value
    f.done()
    return Strategy(base, parse_overrides(ops, str(path)), chunks, str(path))


def run_simulation(task: str | None, strategy: str = "nccl_reference",
                   topology: str = DEFAULT_TOPOLOGY, world_size: int | None = None,
                   preset: str = "pkb", sets: Mapping[str, str] | None = None,
                   overrides: Mapping[str, str] | None = None, iterations: int = 3,
                   trace: bool = False, reference_model: str = "auto",
                   trace_file: str | None = None, on_demand: OnDemand | None = None,
                   symmetry: bool = True) -> SimResult:
    """``trace_file`` (from ``pkbsim trace``): the reference runs that program; without a
    ``task`` the task itself is made from the trace (pkbsim.trace.synthetic). ``on_demand``:
    trace the reference at this instance where no shipped point is it. ``symmetry`` False:
    simulate every rank (pkbsim.symmetry)."""
    check_option(iterations, "iterations", "--iterations")
    if reference_model not in REFERENCE_MODELS:
        raise UsageError(f"--reference-model {reference_model!r}: expected one of "
                         + ", ".join(REFERENCE_MODELS))
    chosen = None
    if trace_file is not None:
        from pkbsim.trace.format import load_trace
        from pkbsim.trace.program import program_of
        from pkbsim.trace.store import ChosenProgram, Point

        traced = load_trace(trace_file)
        program = program_of(traced)
        chosen = ChosenProgram(program, Point(traced.world_size, (), program), "exact")
    if task is None:
        if trace_file is None or chosen is None:
            raise UsageError("give --task, --trace-file, or both")
        from pkbsim.trace.synthetic import task_from_trace

        inst = task_from_trace(traced, chosen.program, world_size)
        topo_sets: Mapping[str, Any] = dict(sets or {})
        if any("." not in key for key in topo_sets):
            raise UsageError("--set with --trace-file alone takes topology fields (dotted)")
    else:
        spec = load_task(task)
        task_sets, topo_sets = split_overrides(sets or {}, spec)
        inst = instantiate(spec, world_size, preset, task_sets)
    topo = load_topology(topology, topo_sets)
    strat = replace(load_strategy(strategy, overrides), reference=reference_model,
                    program=chosen)
    if (chosen is None and on_demand is not None and strat.name == "nccl_reference"
            and not strat.overrides and reference_model in ("auto", "trace")):
        from pkbsim.trace.on_demand import reference_for

        chosen_here = reference_for(inst, on_demand)
        if reference_model == "auto" and chosen_here is not None and not trace_stands_for(
                chosen_here, inst):
            chosen_here = None  # the task file's ops (simulate's auto choice)
        strat = replace(strat, program=chosen_here)
    result = simulate(inst, topo, strat, SimOptions(iterations=iterations, trace=trace,
                                                    symmetry=symmetry))
    return replace(result, topology_overrides=dict(topo_sets))
