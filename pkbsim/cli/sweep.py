"""``pkbsim sweep``: options to a SweepSpec, the run with a progress bar, then the outputs.

Imports stay light at module level (every command is registered at start-up); the engine, the
renderers and matplotlib load inside the command.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pkbsim.cli.options import (
    Format,
    OptionalTask,
    Out,
    format_option,
    number_option,
    require_format,
    sets_option,
    world_size_option,
)
from pkbsim.cli.output import check_writable, image_format, write_output
from pkbsim.errors import UsageError
from pkbsim.files import is_special

if TYPE_CHECKING:
    from pkbsim.planning.sweep import SweepResult

FORMATS = ("table", "csv", "json", "markdown", "html")


class Executor(str, Enum):
    local = "local"
    dask = "dask"


def sweep(
    ctx: typer.Context,
    task: OptionalTask = None,
    collective: Annotated[str | None, typer.Option(
        help="One collective call instead of a task: all_reduce, all_gather, reduce_scatter, "
             "all_to_all, broadcast, ... (size = bytes per rank, nccl-tests' buffer).")] = None,
    vary: Annotated[list[str] | None, typer.Option(
        "--vary", help="NAME=VALUES: an axis. NAME: topology, world_size, preset, size, "
        "algorithm, mechanism, protocol, chunks, sms, a dotted topology field "
        "(scale_up.bandwidth_GBps: NVLink per GPU; scale_up.link_bandwidth_GBps: per link) or a "
        "task parameter. VALUES: a list (2,4,8) or a range "
        "START:STOP:STEP, STEP xF geometric or +D arithmetic (1KiB:1GiB:x2, 2:16:+2). "
        "Repeatable; the last axis varies fastest.")] = None,
    sizes: Annotated[str | None, typer.Option(
        help="With --collective: --vary size=SIZES (e.g. 1KiB:1GiB:x2).")] = None,
    topology: Annotated[str, typer.Option(
        help="Topology name or YAML path, when not varied.")] = "dgx-h100",
    world_size: Annotated[int | None, world_size_option(
        "Ranks, when not varied (default: the preset's, else the task's; 8 for a "
        "collective).")] = None,
    preset: Annotated[str, typer.Option(help="Size preset of a task, when not varied.")]
        = "pkb",
    set_: Annotated[list[str] | None, sets_option(
        "KEY=VALUE: fixed for every point (a one-value --vary). Repeatable.")] = None,
    metric: Annotated[list[str] | None, typer.Option(
        "--metric", help="Repeatable or comma list: roofline (all its terms), t_comm, t_mem, "
        "t_comp, t_latency, t_roof, binding, nccl_reference, custom_best, algbw, busbw, "
        "attainment. Default: t_roof,binding,nccl_reference,custom_best.")] = None,
    fmt: Annotated[Format | None, format_option(
        FORMATS, "table, csv, json (schema pkbsim.sweep/1), markdown or html (one page: the "
                 "plot, a table that sorts and filters; default: by the --out suffix .csv, "
                 ".json, .md, .html, else table).")] = None,
    out: Out = None,
    jsonl: Annotated[Path | None, typer.Option(
        help="Stream each finished point to this JSON-lines file; run the same command again "
             "to resume an interrupted sweep. Default with --out: OUT.partial.jsonl, removed "
             "once OUT is written; without --out, none.")] = None,
    fresh: Annotated[bool, typer.Option(
        "--fresh", help="Start over: overwrite the --jsonl file instead of resuming.")] = False,
    jobs: Annotated[int | None, number_option(
        "jobs", "Worker processes (default: every core); with --executor dask, the "
                "LocalCluster's workers.")] = None,
    executor: Annotated[Executor, typer.Option(
        help="Where the points run: local (a pool of --jobs processes) or dask (a "
             "dask.distributed cluster: --scheduler, else a LocalCluster of --jobs processes; "
             "pip install 'pkbsim[cluster]').")] = Executor.local,
    scheduler: Annotated[str | None, typer.Option(
        help="With --executor dask: the address of a running Dask scheduler "
             "(tcp://HOST:8786), whose workers run the points.")] = None,
    plot: Annotated[Path | None, typer.Option(
        help="Also draw a line plot here (.png, .svg or .pdf).")] = None,
    x: Annotated[str | None, typer.Option(
        "--x", help="Plot x axis (default: size when varied, else the first varied numeric "
                    "axis).")] = None,
    y: Annotated[str | None, typer.Option(
        "--y", help="Plot column(s), comma-separated (default: the first numeric metric "
                    "column).")] = None,
    host_model: Annotated[str | None, typer.Option(
        "--host-model", help="What issues each call in the simulated times: nccl-tests (a C "
        "loop; the default for --collective) or torch (torch.distributed from Python, PKB's "
        "reference; the default for a task).")] = None,
    baseline: Annotated[str | None, typer.Option(
        help="AXIS=VALUE: add X_speedup = the baseline row's X_us / this row's X_us for every "
             "time column (same values on the other axes), e.g. "
             "scale_up.bandwidth_GBps=450.")] = None,
) -> None:
    """Evaluate a task or one collective over a grid of topologies, world sizes, sizes and
    parameters, in parallel; results as a table, CSV, JSON or a plot."""
    if executor is Executor.dask and scheduler is None:
        from pkbsim.planning import fork_server

        fork_server.start()  # its imports overlap this command's; harmless if it exits early
    from pkbsim.cli.progress import sweep_progress
    from pkbsim.cli.signals import sigterm_as_interrupt
    from pkbsim.planning.evaluate import columns
    from pkbsim.planning.request import (
        default_workers,
        failures,
        not_applicable_note,
        runner_for,
        sweep_spec,
    )
    from pkbsim.planning.sweep import run_sweep
    from pkbsim.report import sweep_plot

    if fmt is not None:
        require_format(fmt, FORMATS)
    spec = sweep_spec(task, collective, topology, preset, host_model, vary or [], sizes,
                      world_size, set_ or [], metric or [])
    target = spec.target
    workers = default_workers(jobs, spec)
    plot_fmt = image_format(plot, "--plot") if plot is not None else ""
    cols = columns(spec.metrics, target)
    if baseline is not None:
        from pkbsim.planning.baseline import (
            parse_baseline,
            speedup_columns,
            speedup_summary,
            with_speedups,
        )

        base = parse_baseline(baseline, {a.name: a.values for a in spec.axes})
        cols += speedup_columns(cols)
    chosen = fmt or _format_of(out)
    if plot is not None or x is not None or y is not None or (
            chosen is Format.html and sweep_plot.plottable(spec, cols)):
        if plot is None and chosen is not Format.html:
            raise UsageError("--x and --y work with --plot or --format html")
        x = x or sweep_plot.default_x(spec)
        y = y or sweep_plot.default_y(cols)
        sweep_plot.check_choice(spec, cols, x, y)
    for path, option in ((out, "--out"), (plot, "--plot")):
        if path is not None:
            check_writable(path, option)
    stream = jsonl if jsonl is not None or out is None or str(out) == "-" or is_special(out) \
        else out.with_name(out.name + ".partial.jsonl")
    if stream is not None:
        check_writable(stream, "--jsonl", regular=True)
    with sweep_progress() as progress, sigterm_as_interrupt():
        try:
            with runner_for(executor.value, scheduler, jobs, workers) as runner:
                result = run_sweep(spec, stream, workers, progress, fresh, runner)
        except KeyboardInterrupt:
            if stream is not None:
                sys.stderr.write(f"pkbsim: sweep interrupted; finished points are kept in "
                                 f"{stream}: run the same command to resume\n")
            raise
    for line in (failures(result), not_applicable_note(result)):
        if line:
            sys.stderr.write(line + "\n")
    notes: list[str] = []
    if baseline is not None:
        result = with_speedups(result, *base)
        notes = speedup_summary(result, *base)
    png = sweep_plot.sweep_plot(result, x, y) if x is not None and y is not None and (
        chosen is Format.html or plot_fmt == "png") else b""
    if chosen is Format.html:
        write_output(_render_html(ctx, result, png, notes, stream), out)
    else:
        text = "\n" + "\n".join(notes) + "\n" if baseline is not None and chosen in (
            Format.table, Format.markdown) else ""
        write_output(_render(result, chosen) + text, out)
    if plot is not None:
        assert x is not None and y is not None
        write_output(png if plot_fmt == "png" else sweep_plot.sweep_plot(result, x, y, plot_fmt),
                     plot, "--plot")
    if stream is not None and jsonl is None:
        stream.unlink(missing_ok=True)  # its rows are all in --out now


def _format_of(out: Path | None) -> Format:
    suffix = out.suffix.lower() if out is not None else ""
    return {".csv": Format.csv, ".json": Format.json, ".md": Format.markdown,
            ".html": Format.html, ".htm": Format.html}.get(suffix, Format.table)


def _render(result: SweepResult, fmt: Format) -> str:
    from pkbsim.report import sweep_report

    renderers: dict[Format, Callable[[SweepResult], str]] = {
        Format.table: sweep_report.render_table, Format.csv: sweep_report.render_csv,
        Format.json: sweep_report.render_json,
        Format.markdown: sweep_report.render_markdown}
    return renderers[fmt](result)


def _render_html(ctx: typer.Context, result: SweepResult, png: bytes, notes: list[str],
                 stream: Path | None) -> str:
    """The page, recording the command, each topology and task file, and a resumed stream."""
    from pkbsim.cli.provenance import command_line, named_inputs, provenance
    from pkbsim.report import sweep_report

    values = {a.name: [str(v) for v in a.values] for a in result.spec.axes}
    target = result.spec.target
    topologies = values.get("topology", [target.topology])
    tasks = values.get("task", [target.task] if target.task is not None else [])
    inputs = named_inputs(topologies, tasks)
    if stream is not None and result.counts.resumed:
        inputs.append(("resumed", f"{result.counts.resumed} points read back from {stream}"))
    return sweep_report.render_html(
        result, png, provenance(command_line(ctx), ", ".join(topologies), inputs), notes)
