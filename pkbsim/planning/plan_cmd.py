"""``pkbsim plan``: derived capacity-planning answers (CLI glue; the work is in derived*.py).

Each command prints a table or ``pkbsim.plan/1`` JSON (``--format json``), or writes ``--out``.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

SCHEMA = "pkbsim.plan/1"
plan_app = typer.Typer(no_args_is_help=True, help="Derived answers: threshold sizes, crossovers, "
                       "the SM split, the latency exit.")


class PlanFormat(str, Enum):
    table = "table"
    json = "json"


class Mode(str, Enum):
    mechanisms = "mechanisms"
    algorithms = "algorithms"


Topo = Annotated[str, typer.Option(help="Topology name or YAML path.")]
World = Annotated[int | None, typer.Option(
    "--world-size", "-w", help="Ranks (default: 8, or the topology's GPUs if fewer; tasks: the "
                               "preset's).")]
Sets = Annotated[list[str] | None, typer.Option(
    "--set", help="KEY=VALUE: a dotted topology field (mechanisms.tma.latency_us=2), or for "
                  "tasks a task parameter. Repeatable.")]
Fmt = Annotated[PlanFormat, typer.Option("--format", help="table or json.")]
Out = Annotated[Path | None, typer.Option(help="Write here instead of stdout.")]
Sizes = Annotated[str, typer.Option(help="LOW:HIGH bytes per rank searched (units B, KiB, MiB, "
                                         "GiB, KB, MB, GB).")]
Collective = Annotated[str, typer.Option(help="Collective kind, e.g. all_reduce.")]
Plot = Annotated[Path | None, typer.Option(
    help="Also draw the curves the answer was read from here (.png, .svg or .pdf).")]


def _value(text: str) -> Any:
    from pkbsim.planning.axes import parse_number

    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    try:
        return parse_number(text, "--set")
    except Exception:
        return text


def _sets(items: list[str] | None) -> dict[str, Any]:
    from pkbsim.cli import parse_sets

    return {k: _value(v) for k, v in parse_sets(items or []).items()}


def _sizes(text: str) -> tuple[int, int]:
    from pkbsim.errors import UsageError
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


def _check_out(out: Path | None, plot: Path | None = None) -> str:
    """Fail before any work when ``--out`` or ``--plot`` cannot be written; the plot format."""
    from pkbsim.cli import check_writable
    from pkbsim.report.plot import image_format

    if out is not None:
        check_writable(out, "--out")
    if plot is None:
        return ""
    fmt = image_format(str(plot))
    check_writable(plot, "--plot")
    return fmt


def _emit(command: str, inputs: dict[str, Any], results: Any, table: str, fmt: PlanFormat,
          out: Path | None) -> None:
    from pkbsim.cli import write_output

    if fmt is PlanFormat.json:
        doc = {"schema": SCHEMA, "command": command, "inputs": inputs, "results": results}
        write_output(json.dumps(doc, indent=2) + "\n", out)
    else:
        write_output(table, out)


def _table(title: str, head: str, columns: list[str], rows: list[list[str]],
           notes: list[str] | None = None) -> str:
    from rich.table import Table

    from pkbsim.report.table import to_text

    table = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
    for i, col in enumerate(columns):
        table.add_column(col, justify="left" if i == 0 else "right", overflow="fold")
    for row in rows:
        table.add_row(*row)
    return head + "\n" + to_text(table) + "".join(f"{n}\n" for n in notes or [])


def _b(n: float | None) -> str:
    from pkbsim.units import format_bytes

    return "-" if n is None else format_bytes(n)


@plan_app.command("threshold")
def threshold_cmd(
    collective: Collective, topology: Topo = "dgx-h100", world_size: World = None,
    fraction: Annotated[float, typer.Option(help="Fraction of line rate, in (0, 1].")] = 0.8,
    mechanism: Annotated[list[str] | None, typer.Option(
        help="Only this mechanism (repeatable; default: every one that can carry it).")] = None,
    algorithm: Annotated[str | None, typer.Option(
        help="Force this algorithm (default: the fastest at each size).")] = None,
    sizes: Sizes = "256B:4GiB", set_: Sets = None, fmt: Fmt = PlanFormat.table, out: Out = None,
    plot: Plot = None,
) -> None:
    """The smallest message per mechanism whose busbw reaches FRACTION x line rate."""
    from pkbsim.planning.derived import Curves, threshold

    plot_fmt = _check_out(out, plot)
    topo, w = _collective_setup(topology, set_, world_size)
    lo, hi = _sizes(sizes)
    curves: Curves = {}
    res = threshold(topo, collective, w, fraction, mechanism, algorithm, lo, hi, curves)
    line = res[0].line_rate_busbw_GBps if res else 0.0
    head = (f"{collective} on {topo.name}, {w} ranks: smallest message (bytes per rank) with "
            f"busbw >= {fraction:g} x line rate {line:.4g} GB/s = {fraction * line:.4g} GB/s\n"
            f"(one bare call simulated, best algorithm per size"
            f"{'' if algorithm is None else ' forced to ' + algorithm}; searched {_b(lo)} to "
            f"{_b(hi)}, to 1%)")
    rows = [[r.mechanism, _b(r.size_bytes), str(r.size_bytes or "-"), r.algorithm or "-",
             "-" if r.busbw_at_size_GBps is None else f"{r.busbw_at_size_GBps:.4g}",
             f"{r.max_busbw_GBps:.4g}", _b(r.max_busbw_at_bytes)] for r in res]
    text = _table("Threshold per mechanism", head,
                  ["mechanism", "size", "bytes", "algorithm", "busbw GB/s", "max busbw GB/s",
                   "max at"], rows, ["'-': not reached up to the upper size"]
                  + (["nvls_multimem: NVLS's busbw is not wire bandwidth (docs/metrics.md 1)"]
                     if collective in ("all_reduce", "reduce_scatter", "reduce")
                     and any(r.mechanism == "nvls_multimem" for r in res) else []))
    inputs = {"collective": collective, "topology": topo.name, "world_size": w,
              "fraction": fraction, "algorithm": algorithm, "lo_bytes": lo, "hi_bytes": hi}
    _emit("threshold", inputs, [asdict(r) for r in res], text, fmt, out)
    if plot is not None:
        from pkbsim.cli import write_output
        from pkbsim.report.plan_plot import threshold_plot

        title = f"{collective} on {topo.name}, {w} ranks: busbw per mechanism (bare call)"
        write_output(threshold_plot(title, curves, res, plot_fmt), plot, "--plot")


def _contender(text: str) -> Any:
    from pkbsim.collectives import ALGORITHMS
    from pkbsim.errors import UsageError
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


@plan_app.command("crossover")
def crossover_cmd(
    collective: Collective, topology: Topo = "dgx-h100", world_size: World = None,
    mode: Annotated[Mode, typer.Option(
        help="mechanisms: copy engine vs SM load/store vs TMA, each with its best algorithm; "
             "algorithms: every algorithm that can carry it, each on its best mechanism."
    )] = Mode.mechanisms,
    contender: Annotated[list[str] | None, typer.Option(
        help="ALGORITHM, MECHANISM or ALGORITHM/MECHANISM (repeatable; replaces --mode).")
    ] = None,
    sizes: Sizes = "256B:4GiB", set_: Sets = None, fmt: Fmt = PlanFormat.table, out: Out = None,
    plot: Plot = None,
) -> None:
    """Sizes where the fastest of several mechanisms or algorithms changes."""
    from pkbsim.planning.derived import Curves, contenders, crossovers

    plot_fmt = _check_out(out, plot)
    topo, w = _collective_setup(topology, set_, world_size)
    lo, hi = _sizes(sizes)
    skipped: list[str] = []
    if contender:
        chosen = [_contender(c) for c in contender]
    else:
        chosen, skipped = contenders(topo, collective, w, mode.value)
    curves: Curves = {}
    res = crossovers(topo, collective, w, chosen, lo, hi, curves)
    names = ", ".join(c.label for c in chosen)
    head = (f"{collective} on {topo.name}, {w} ranks: fastest of {names} (one bare call "
            f"simulated; sizes in bytes per rank, {_b(lo)} to {_b(hi)}, located to 1%)")
    rows = [[f"{_b(c.size_bytes)} ({c.size_bytes})", f"{c.below} ({c.below_how})",
             f"{c.above} ({c.above_how})", f"{c.below_time_us:.4g}", f"{c.above_time_us:.4g}"]
            for c in res]
    notes = ([] if res else ["no crossover: one contender is fastest over the whole range"])
    notes += [f"skipped {s}" for s in skipped]
    text = _table("Crossovers (times at the crossing, us)", head,
                  ["size", "faster below", "faster from here", "t below", "t above"], rows, notes)
    inputs = {"collective": collective, "topology": topo.name, "world_size": w,
              "contenders": [asdict(c) for c in chosen], "skipped": skipped,
              "lo_bytes": lo, "hi_bytes": hi}
    _emit("crossover", inputs, [asdict(c) for c in res], text, fmt, out)
    if plot is not None:
        from pkbsim.cli import write_output
        from pkbsim.report.plan_plot import crossover_plot

        title = f"{collective} on {topo.name}, {w} ranks: one call per contender (bare call)"
        write_output(crossover_plot(title, curves, res, plot_fmt), plot, "--plot")


Task = Annotated[str, typer.Option("--task", "-t", help="Task id, name, alias or YAML path.")]
Preset = Annotated[str, typer.Option(help="Size preset (pkb, production or a task's).")]


def _task_point(world_size: int | None, sets: list[str] | None) -> dict[str, Any]:
    point = _sets(sets)
    if world_size is not None:
        point["world_size"] = world_size
    return point


@plan_app.command("sm-split")
def sm_split_cmd(
    task: Task, topology: Topo = "dgx-h100", world_size: World = None, preset: Preset = "pkb",
    mechanism: Annotated[str | None, typer.Option(
        help="Force this comm mechanism (default: custom_best's choice per SM count).")] = None,
    max_sms: Annotated[int | None, typer.Option(help="Largest SM count tried (default: the "
                                                     "GPU's).")] = None,
    set_: Sets = None, fmt: Fmt = PlanFormat.table, out: Out = None,
) -> None:
    """How many SMs to give communication before compute slows more than communication gains."""
    from pkbsim.planning.derived_task import sm_split
    from pkbsim.planning.evaluate import Target

    _check_out(out)
    res = sm_split(Target(task=task, topology=topology, preset=preset),
                   _task_point(world_size, set_), mechanism, max_sms)
    head = (f"Task {res.task} on {res.topology}, {res.world_size} ranks, preset {res.preset}: "
            f"custom_best with every comm op holding s of {res.sm_count} SMs\n"
            f"Best: {res.best_sms} SMs, {res.best_time_us:.4g} us; default (each mechanism's "
            f"sms_to_saturate: {', '.join(map(str, res.default_sms)) or '-'}): "
            f"{res.default_time_us:.4g} us ({'; '.join(res.default_carriers)})")
    rows = [[str(p.sms), f"{p.time_us:.4g}", "; ".join(p.carriers)
             + ("  <- best" if p.sms == res.best_sms else "")] for p in res.curve]
    text = _table("Predicted time per SM count", head, ["SMs", "custom_best us", "carried by"],
                  rows)
    inputs = {"task": res.task, "topology": res.topology, "world_size": res.world_size,
              "preset": res.preset, "mechanism": mechanism, "set": _sets(set_)}
    _emit("sm-split", inputs, asdict(res), text, fmt, out)


@plan_app.command("latency-exit")
def latency_exit_cmd(
    task: Task,
    param: Annotated[str, typer.Option(help="The task size parameter searched, e.g. M.")],
    topology: Topo = "dgx-h100", world_size: World = None, preset: Preset = "pkb",
    max_value: Annotated[int, typer.Option(help="Largest value tried.")] = 2**40,
    multiple_of: Annotated[int, typer.Option(
        help="Only values that are multiples of this (tasks that split a size over ranks).")
    ] = 1,
    set_: Sets = None, fmt: Fmt = PlanFormat.table, out: Out = None,
) -> None:
    """The size at which a task's roofline leaves (or enters) the latency-bound regime."""
    from pkbsim.planning.derived_task import latency_exit
    from pkbsim.planning.evaluate import Target

    _check_out(out)
    res = latency_exit(Target(task=task, topology=topology, preset=preset), param,
                       _task_point(world_size, set_), max_value, multiple_of)
    head = (f"Task {res.task} on {res.topology}, {res.world_size} ranks, preset {res.preset}: "
            f"{param} = {res.start_value} is {res.start_binding}-bound")
    if res.value is None:
        what = ("no value up to " if res.direction == "up" else "no value down to ")
        answer = f"{what}{res.other_value:,} changes the binding"
    elif res.direction == "up":
        answer = (f"leaves the latency regime at {param} = {res.value:,} (binding "
                  f"{res.binding}, t_roof {res.t_roof_us:.4g} us); {res.other_value:,} is "
                  "still latency-bound")
    else:
        answer = (f"largest latency-bound value: {param} = {res.value:,} (t_roof "
                  f"{res.t_roof_us:.4g} us); {res.other_value:,} is {res.start_binding}-bound")
    inputs = {"task": res.task, "topology": res.topology, "world_size": res.world_size,
              "preset": res.preset, "param": param, "max_value": max_value,
              "multiple_of": multiple_of, "set": _sets(set_)}
    _emit("latency-exit", inputs, asdict(res), head + "\n" + answer + "\n", fmt, out)
