"""``pkbsim analyze``: the roofline of one task (with both strategies' simulated times), or of
every shipped task (``--all``) as a table, CSV, Markdown, JSON, one HTML page and a plot."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

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
from pkbsim.errors import UsageError

if TYPE_CHECKING:
    from pkbsim.overview import Overview
    from pkbsim.report.html_page import Provenance

ONE_TASK = ("table", "json")
ALL_TASKS = ("table", "json", "csv", "markdown", "html")


def analyze(
    ctx: typer.Context,
    task: OptionalTask = None,
    all_: Annotated[bool, typer.Option(
        "--all", help="Every shipped task: one row each, a summary, optionally a plot.")] = False,
    topology: Topology = "dgx-h100",
    world_size: Annotated[int | None, world_size_option(
        "Ranks (default: the preset's, else the task's).")] = None,
    preset: Annotated[str, typer.Option(
        help="Size preset: pkb (the benchmark's), production (each task's production size), "
             "or a task's preset name.")] = "pkb",
    set_: Sets = None,
    measured_us: Annotated[float | None, number_option(
        "measured_us", "A measured time (us) to report attainment against.")] = None,
    fmt: Annotated[Format, format_option(
        ALL_TASKS, "table or json; with --all also csv, markdown or html (one page: the plot, "
                   "a table that sorts and filters).")] = Format.table,
    out: Out = None,
    filter_: Annotated[list[str] | None, typer.Option(
        "--filter", help="--all: KEY=VALUE, e.g. parallelism=EP, binding=latency, id=40-44, "
                         "source=VeOmni, name=moe, data_dependent=true. Repeatable (all must "
                         "match).")] = None,
    sort: Annotated[str, typer.Option(
        help="--all: sort by id, name, parallelism, bytes, t_comm, t_mem, t_comp, t_latency, "
             "t_roof or binding.")] = "id",
    reverse: Annotated[bool, typer.Option("--reverse", help="--all: largest first.")] = False,
    plot: Annotated[Path | None, typer.Option(
        help="--all: also draw the overview plot here (.png, .svg or .pdf).")] = None,
    predict: Annotated[bool, typer.Option(
        "--predict/--no-predict", help="One task: also simulate the nccl_reference and "
        "custom_best strategies (pkbsim simulate) and report their times.")] = True,
    trace_on_demand: TraceOnDemand = True,
    pkb_root: PkbRoot = None,
) -> None:
    """Roofline bounds of one task on one topology, or of every task (--all)."""
    if all_ == (task is not None):
        raise UsageError("give either --task NAME or --all")
    if all_:
        if measured_us is not None:
            raise UsageError("--measured-us is for one task (--task), not --all")
        require_format(fmt, ALL_TASKS)
        _analyze_all(topology, world_size, preset, parse_sets(set_ or []), fmt, out,
                     filter_ or [], sort, reverse, plot, ctx)
        return
    for name, used in (("--filter", bool(filter_)), ("--plot", plot is not None),
                       ("--reverse", reverse), ("--sort", sort != "id")):
        if used:
            raise UsageError(f"{name} works with --all")
    require_format(fmt, ALL_TASKS)
    if fmt.value not in ONE_TASK:
        raise UsageError(f"--format {fmt.value} works with --all; one task: table or json")
    from pkbsim import api

    assert task is not None
    if out is not None:
        check_writable(out, "--out")
    report = api.analyze(task, topology=topology, world_size=world_size, preset=preset,
                         sets=parse_sets(set_ or []), measured_us=measured_us, predict=predict,
                         trace_on_demand=trace_on_demand, pkb_root=pkb_root)
    write_output(report.to_json() if fmt is Format.json else report.to_text(), out)


def _analyze_all(topology: str, world_size: int | None, preset: str, sets: dict[str, str],
                 fmt: Format, out: Path | None, filters: list[str], sort: str, reverse: bool,
                 plot: Path | None, ctx: typer.Context) -> None:
    from pkbsim import api
    from pkbsim.overview import parse_filters
    from pkbsim.report import overview_report as report
    from pkbsim.report.overview_plot import overview_plot

    parse_filters(filters)  # a bad --filter fails before the paths are checked
    fmt_image = image_format(plot, "--plot") if plot is not None else ""
    if plot is not None:
        check_writable(plot, "--plot")
    if out is not None:
        check_writable(out, "--out")
    ov = api.analyze_all(topology=topology, world_size=world_size, preset=preset, sets=sets,
                         filters=filters, sort=sort, reverse=reverse).result
    png = overview_plot([ov]) if fmt is Format.html or fmt_image == "png" else b""
    if fmt is Format.html:
        write_output(report.render_html(ov, png, _provenance(ctx, ov)), out)
    else:
        render = {Format.table: report.render_table, Format.json: report.render_json,
                  Format.csv: report.render_csv, Format.markdown: report.render_markdown}[fmt]
        write_output(render(ov), out)
    if plot is not None:
        write_output(png if fmt_image == "png" else overview_plot([ov], fmt_image), plot,
                     "--plot")


def _provenance(ctx: typer.Context, ov: Overview) -> Provenance:
    """The command, the topology file and the task files analysed."""
    from pkbsim.cli.provenance import command_line, provenance, task_inputs, topology_inputs

    return provenance(command_line(ctx), ov.topology.name,
                      [*topology_inputs([ov.topology]), *task_inputs([r.spec for r in ov.rows])])
