"""``pkbsim plan``: derived capacity-planning answers (threshold, crossover, sm-split,
latency-exit); each a table or ``pkbsim.plan/1`` JSON, optionally the curves it was read from.
The work is pkbsim.planning.derived's and derived_task's; pkbsim.report.plan_report renders."""

from __future__ import annotations

from dataclasses import asdict
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from pkbsim.cli.options import (
    Format,
    Out,
    Topology,
    format_option,
    number_option,
    require_format,
    sets_option,
    world_size_option,
)
from pkbsim.cli.output import check_writable, image_format, parse_sets, write_output
from pkbsim.errors import UsageError

FORMATS = ("table", "json")


class Mode(str, Enum):
    mechanisms = "mechanisms"
    algorithms = "algorithms"


World = Annotated[int | None, world_size_option(
    "Ranks (default: 8, or the topology's GPUs if fewer; tasks: the preset's).")]
Sets = Annotated[list[str] | None, sets_option(
    "KEY=VALUE: a dotted topology field (mechanisms.tma.latency_us=2), or for tasks a task "
    "parameter. Repeatable.")]
Fmt = Annotated[Format, format_option(FORMATS, "table or json.")]
Sizes = Annotated[str, typer.Option(help="LOW:HIGH bytes per rank searched (units B, KiB, MiB, "
                                         "GiB, KB, MB, GB).")]
Collective = Annotated[str, typer.Option(help="Collective kind, e.g. all_reduce.")]
Plot = Annotated[Path | None, typer.Option(
    help="Also draw the curves the answer was read from here (.png, .svg or .pdf).")]
Task = Annotated[str, typer.Option("--task", "-t", help="Task id, name, alias or YAML path.")]
Preset = Annotated[str, typer.Option(help="Size preset (pkb, production or a task's).")]


def threshold(
    collective: Collective, topology: Topology = "dgx-h100", world_size: World = None,
    fraction: Annotated[float, number_option("fraction", "Fraction of line rate, in (0, 1].")]
        = 0.8,
    mechanism: Annotated[list[str] | None, typer.Option(
        help="Only this mechanism (repeatable; default: every one that can carry it).")] = None,
    algorithm: Annotated[str | None, typer.Option(
        help="Force this algorithm (default: the fastest at each size).")] = None,
    sizes: Sizes = "256B:4GiB", set_: Sets = None, fmt: Fmt = Format.table, out: Out = None,
    plot: Plot = None,
) -> None:
    """The smallest message per mechanism whose busbw reaches FRACTION x line rate."""
    from pkbsim.cli.progress import step_progress
    from pkbsim.planning.derived import Curves
    from pkbsim.planning.derived import threshold as find
    from pkbsim.report.plan_plot import threshold_plot
    from pkbsim.report.plan_report import threshold_table

    plot_fmt = _check_out(fmt, out, plot)
    topo, w = _collective_setup(topology, set_, world_size)
    lo, hi = _sizes(sizes)
    curves: Curves = {}
    with step_progress("threshold") as progress:
        res = find(topo, collective, w, fraction, mechanism, algorithm, lo, hi, curves,
                   progress)
    inputs = {"collective": collective, "topology": topo.name, "world_size": w,
              "fraction": fraction, "algorithm": algorithm, "lo_bytes": lo, "hi_bytes": hi}
    _emit("threshold", inputs, [asdict(r) for r in res],
          lambda: threshold_table(res, collective, topo.name, w, fraction, algorithm, lo, hi),
          fmt, out)
    if plot is not None:
        title = f"{collective} on {topo.name}, {w} ranks: busbw per mechanism (bare call)"
        write_output(threshold_plot(title, curves, res, plot_fmt), plot, "--plot")


def crossover(
    collective: Collective, topology: Topology = "dgx-h100", world_size: World = None,
    mode: Annotated[Mode, typer.Option(
        help="mechanisms: copy engine vs SM load/store vs TMA, each with its best algorithm; "
             "algorithms: every algorithm that can carry it, each on its best mechanism."
    )] = Mode.mechanisms,
    contender: Annotated[list[str] | None, typer.Option(
        help="ALGORITHM, MECHANISM or ALGORITHM/MECHANISM (repeatable; replaces --mode).")
    ] = None,
    sizes: Sizes = "256B:4GiB", set_: Sets = None, fmt: Fmt = Format.table, out: Out = None,
    plot: Plot = None,
) -> None:
    """Sizes where the fastest of several mechanisms or algorithms changes."""
    from pkbsim.cli.progress import step_progress
    from pkbsim.planning.derived import Curves, contenders, crossovers
    from pkbsim.report.plan_plot import crossover_plot
    from pkbsim.report.plan_report import crossover_table

    plot_fmt = _check_out(fmt, out, plot)
    topo, w = _collective_setup(topology, set_, world_size)
    lo, hi = _sizes(sizes)
    skipped: list[str] = []
    if contender:
        chosen = [_contender(c) for c in contender]
    else:
        chosen, skipped = contenders(topo, collective, w, mode.value)
    curves: Curves = {}
    with step_progress("crossover") as progress:
        res = crossovers(topo, collective, w, chosen, lo, hi, curves, progress)
    names = ", ".join(c.label for c in chosen)
    inputs = {"collective": collective, "topology": topo.name, "world_size": w,
              "contenders": [asdict(c) for c in chosen], "skipped": skipped,
              "lo_bytes": lo, "hi_bytes": hi}
    _emit("crossover", inputs, [asdict(c) for c in res],
          lambda: crossover_table(res, collective, topo.name, w, names, skipped, lo, hi),
          fmt, out)
    if plot is not None:
        title = f"{collective} on {topo.name}, {w} ranks: one call per contender (bare call)"
        write_output(crossover_plot(title, curves, res, plot_fmt), plot, "--plot")


def sm_split(
    task: Task, topology: Topology = "dgx-h100", world_size: World = None,
    preset: Preset = "pkb",
    mechanism: Annotated[str | None, typer.Option(
        help="Force this comm mechanism (default: custom_best's choice per SM count).")] = None,
    max_sms: Annotated[int | None, number_option(
        "sms", "Largest SM count tried (default: the GPU's).")] = None,
    set_: Sets = None, fmt: Fmt = Format.table, out: Out = None,
) -> None:
    """How many SMs to give communication before compute slows more than communication gains."""
    from pkbsim.planning.derived_task import sm_split as split
    from pkbsim.planning.evaluate import Target
    from pkbsim.report.plan_report import sm_split_table

    _check_out(fmt, out)
    res = split(Target(task=task, topology=topology, preset=preset),
                _task_point(world_size, set_), mechanism, max_sms)
    inputs = {"task": res.task, "topology": res.topology, "world_size": res.world_size,
              "preset": res.preset, "mechanism": mechanism, "set": _sets(set_)}
    _emit("sm-split", inputs, asdict(res), lambda: sm_split_table(res), fmt, out)


def latency_exit(
    task: Task,
    param: Annotated[str, typer.Option(help="The task size parameter searched, e.g. M.")],
    topology: Topology = "dgx-h100", world_size: World = None, preset: Preset = "pkb",
    max_value: Annotated[int, number_option("whole", "Largest value tried.")] = 2**40,
    multiple_of: Annotated[int, number_option(
        "whole", "Only values that are multiples of this (tasks that split a size over ranks).")
    ] = 1,
    set_: Sets = None, fmt: Fmt = Format.table, out: Out = None,
) -> None:
    """The size at which a task's roofline leaves (or enters) the latency-bound regime."""
    from pkbsim.planning.derived_task import latency_exit as find
    from pkbsim.planning.evaluate import Target
    from pkbsim.report.plan_report import latency_exit_text

    _check_out(fmt, out)
    res = find(Target(task=task, topology=topology, preset=preset), param,
               _task_point(world_size, set_), max_value, multiple_of)
    inputs = {"task": res.task, "topology": res.topology, "world_size": res.world_size,
              "preset": res.preset, "param": param, "max_value": max_value,
              "multiple_of": multiple_of, "set": _sets(set_)}
    _emit("latency-exit", inputs, asdict(res), lambda: latency_exit_text(res, param), fmt, out)


def _value(text: str) -> Any:
    from pkbsim.planning.axes import parse_number

    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    try:
        return parse_number(text, "--set")
    except Exception:
        return text


def _sets(items: list[str] | None) -> dict[str, Any]:
    return {k: _value(v) for k, v in parse_sets(items or []).items()}


def _sizes(text: str) -> tuple[int, int]:
    from pkbsim.planning.axes import parse_number

    lo, sep, hi = text.partition(":")
    if not sep:
        raise UsageError(f"--sizes {text}: expected LOW:HIGH, e.g. 256B:4GiB")
    return int(parse_number(lo, "--sizes")), int(parse_number(hi, "--sizes"))


def _collective_setup(topology: str, sets: list[str] | None, world_size: int | None
                      ) -> tuple[Any, int]:
    from pkbsim.topology import load_topology

    topo = load_topology(topology, _sets(sets))
    return topo, world_size if world_size is not None else min(8, topo.total_gpus)


def _task_point(world_size: int | None, sets: list[str] | None) -> dict[str, Any]:
    point = _sets(sets)
    if world_size is not None:
        point["world_size"] = world_size
    return point


def _contender(text: str) -> Any:
    from pkbsim.collectives import ALGORITHMS
    from pkbsim.planning.derived import Contender
    from pkbsim.topology.schema import MECHANISMS

    alg: str | None = None
    mech: str | None = None
    for part in text.split("/"):
        if part in ALGORITHMS and alg is None:
            alg = part
        elif part in MECHANISMS and mech is None:
            mech = part
        else:
            raise UsageError(f"--contender {text}: expected ALGORITHM, MECHANISM or "
                             f"ALGORITHM/MECHANISM (algorithms: {', '.join(ALGORITHMS)}; "
                             f"mechanisms: {', '.join(MECHANISMS)})")
    return Contender(alg, mech)


def _check_out(fmt: Format, out: Path | None, plot: Path | None = None) -> str:
    """Fail before any work on a bad ``--format``, ``--out`` or ``--plot``; the plot format."""
    require_format(fmt, FORMATS)
    if out is not None:
        check_writable(out, "--out")
    if plot is None:
        return ""
    plot_fmt = image_format(plot, "--plot")
    check_writable(plot, "--plot")
    return plot_fmt


def _emit(command: str, inputs: dict[str, Any], results: Any, table: Any, fmt: Format,
          out: Path | None) -> None:
    """JSON of the answer, or ``table()``'s text."""
    from pkbsim.report.plan_report import plan_json

    write_output(plan_json(command, inputs, results) if fmt is Format.json else table(), out)
