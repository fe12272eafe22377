"""``pkbsim simulate``: one task under a strategy as a table or JSON, optionally its timeline
as a Chrome/Perfetto trace and a Gantt chart."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pkbsim.cli.options import (
    Format,
    OptionalTask,
    Out,
    PkbRoot,
    Sets,
    Topology,
    TraceOnDemand,
    format_option,
    number_option,
    require_format,
    world_size_option,
)
from pkbsim.cli.output import check_writable, image_format, parse_sets, write_output

FORMATS = ("table", "json")


def simulate(
    task: OptionalTask = None,
    strategy: Annotated[str, typer.Option(
        help="nccl_reference (what PKB's reference does), custom_best (the best kernel the "
             "machine allows), or a strategy YAML file.")] = "nccl_reference",
    topology: Topology = "dgx-h100",
    world_size: Annotated[int | None, world_size_option(
        "Ranks (default: the preset's, else the task's).")] = None,
    preset: Annotated[str, typer.Option(
        help="Size preset: pkb, production, or a task's preset name.")] = "pkb",
    set_: Sets = None,
    override: Annotated[list[str] | None, typer.Option(
        "--override", help="OP.KEY=VALUE for one op: mechanism, algorithm, protocol, chunks or "
                           "sms (e.g. a2a_logits.mechanism=tma). Repeatable.")] = None,
    iterations: Annotated[int, number_option(
        "iterations", "Back-to-back iterations simulated; the time is the steady state.")] = 3,
    trace: Annotated[Path | None, typer.Option(
        help="Write a Chrome/Perfetto trace (JSON) of the timeline here.")] = None,
    gantt: Annotated[Path | None, typer.Option(
        help="Draw the timeline as a Gantt chart here (.png, .svg or .pdf).")] = None,
    reference_model: Annotated[str, typer.Option(
        help="nccl_reference's program: auto (the shipped trace where there is one, else the "
             "task file), trace (fail without one) or task (the task file's ops).")] = "auto",
    trace_file: Annotated[Path | None, typer.Option(
        help="A trace from pkbsim trace: the reference runs it (with --task, in place of the "
             "task's; alone, the task is made from it).")] = None,
    fmt: Annotated[Format, format_option(FORMATS, "table or json.")] = Format.table,
    out: Out = None,
    trace_on_demand: TraceOnDemand = True,
    pkb_root: PkbRoot = None,
    symmetry: Annotated[bool, typer.Option(
        help="Simulate one rank per class of equivalent ranks where the task allows it "
             "(docs/simulation.md); --no-symmetry simulates every rank.")] = True,
) -> None:
    """Predicted time of one task under a strategy: per-op breakdown, link and SM utilisation,
    critical path; optionally a trace and a Gantt chart."""
    require_format(fmt, FORMATS, "simulate writes table or json")
    gantt_fmt = image_format(gantt, "--gantt") if gantt is not None else ""
    for path, option in ((out, "--out"), (trace, "--trace"), (gantt, "--gantt")):
        if path is not None:
            check_writable(path, option)
    from pkbsim import api

    report = api.simulate(task, strategy=strategy, topology=topology, world_size=world_size,
                          preset=preset, sets=parse_sets(set_ or []),
                          overrides=parse_sets(override or [], "--override"),
                          iterations=iterations, trace=trace is not None or gantt is not None,
                          reference_model=reference_model, trace_file=trace_file,
                          trace_on_demand=trace_on_demand, pkb_root=pkb_root,
                          symmetry=symmetry)
    assert isinstance(report, api.SimulationReport)
    write_output(report.to_json() if fmt is Format.json else report.to_text(), out)
    if trace is not None:
        write_output(report.chrome_trace(), trace, "--trace")
    if gantt is not None:
        write_output(report.gantt(gantt_fmt), gantt, "--gantt")
