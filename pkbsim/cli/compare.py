"""``pkbsim compare``: measured kernels against the roofline, the simulator and their causes.

One problem: ``--problem P`` with ``--measured-us T`` (one candidate) or ``--measured LOGS|CSV``
(its reference and candidates), optionally ``--solution FILE`` to inspect the candidate.
``--measured-trace FILE|DIR`` adds each call's measured time split from its Kineto trace, beside
the model's (and gives the measured times where no other option does).
A directory: ``--measured LOGS|CSV`` without ``--problem``, every problem in it, optionally
``--solutions DIR`` holding ``<problem stem>_<backend>.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from pkbsim.cli.options import (
    Format,
    Out,
    PkbRoot,
    Topology,
    TraceOnDemand,
    format_option,
    number_option,
    world_size_option,
)
from pkbsim.cli.output import check_writable, image_format, write_output
from pkbsim.cli.provenance import command_line, path_input, provenance, topology_inputs
from pkbsim.errors import UsageError

FORMATS = ("table", "markdown", "html", "json")


def compare(
    ctx: typer.Context,
    problem: Annotated[str | None, typer.Option(
        "--problem", "-p", help="One problem (id, name, alias); without it, every problem "
                                "in --measured.")] = None,
    measured: Annotated[Path | None, typer.Option(
        help="PKB logs folder (problem_<stem>/<backend>/rank_<r>_perf.json) or CSV "
             "(problem,variant,time_us[,rank]).")] = None,
    measured_us: Annotated[float | None, number_option(
        "measured_us", "With --problem: one candidate's measured time (us).")] = None,
    solution: Annotated[Path | None, typer.Option(
        help="With --problem: the candidate's solution file, inspected for the causes.")] = None,
    solutions: Annotated[Path | None, typer.Option(
        help="Folder of solution files named <problem stem>_<backend>.py.")] = None,
    topology: Topology = "dgx-h100",
    world_size: Annotated[int | None, world_size_option(
        "Ranks (default: the ranks measured, else the preset's).")] = None,
    preset: Annotated[str, typer.Option(help="Size preset (pkb: the benchmark's).")] = "pkb",
    fmt: Annotated[Format, format_option(
        FORMATS, "table, markdown, html (plots embedded) or json (schema pkbsim.compare/1).")]
        = Format.table,
    out: Out = None,
    plot: Annotated[Path | None, typer.Option(
        help="Also write the attainment and gap-cause plot here (.png).")] = None,
    timeline: Annotated[Path | None, typer.Option(
        help="With --problem: the simulated timeline of PKB's reference with t_roof and each "
             "measured time marked (.png).")] = None,
    trace_on_demand: TraceOnDemand = True,
    pkb_root: PkbRoot = None,
    measured_trace: Annotated[Path | None, typer.Option(
        "--measured-trace", help="PyTorch profiler (Kineto) traces: a trace file, or a folder "
        "(pkbsim run's logs, PKB's traces/): each call's measured time split into host, "
        "syncs, kernel kinds and communication, beside the model's split.")] = None,
    call_marker: Annotated[str | None, typer.Option(
        "--call-marker", help="With --measured-trace: the record_function range, operator "
        "or Python function that is one call (default: ProfilerStep#N, else solution()).")]
        = None,
) -> None:
    """Measured kernels against the roofline and the simulator: attainment, speedup over
    PKB's reference, and the gap split into ranked causes with the fix to try for each."""
    compare_command(problem, measured, measured_us, solution, solutions, topology, world_size,
                    preset, fmt.value, out, plot, timeline=timeline, command=command_line(ctx),
                    trace_on_demand=trace_on_demand, pkb_root=pkb_root,
                    measured_trace=measured_trace, call_marker=call_marker)


def compare_command(problem: str | None, measured: Path | None, measured_us: float | None,
                    solution: Path | None, solutions: Path | None, topology: str,
                    world_size: int | None, preset: str, fmt: str, out: Path | None,
                    plot: Path | None, *, simulate_fixes: bool = True,
                    timeline: Path | None = None, command: str = "pkbsim compare",
                    trace_on_demand: bool = True, pkb_root: Path | None = None,
                    measured_trace: Path | None = None, call_marker: str | None = None
                    ) -> None:
    """The command with ``fmt`` as text; ``simulate_fixes=False`` skips the simulated time
    after each fix (tests); ``command``: the command line an HTML page records."""
    from pkbsim import api
    from pkbsim.comparator.comparison import reference_timeline
    from pkbsim.report import compare_report as report
    from pkbsim.topology import load_topology

    _check_options(problem, measured, measured_us, solution, solutions, fmt, plot,
                   measured_trace)
    if timeline is not None and (problem is None or timeline.suffix.lower() != ".png"):
        raise UsageError("--timeline needs --problem and a file ending in .png")
    for path, option in ((out, "--out"), (plot, "--plot"), (timeline, "--timeline")):
        if path is not None:
            check_writable(path, option)
    result = api.compare(problem, measured=measured, measured_us=measured_us,
                         solution=solution, solutions=solutions, topology=topology,
                         world_size=world_size, preset=preset,
                         simulate_fixes=simulate_fixes, trace_on_demand=trace_on_demand,
                         pkb_root=pkb_root, measured_trace=measured_trace,
                         call_marker=call_marker).result
    png = report.comparison_plot(result) if fmt == "html" or plot is not None else b""
    text = {"table": report.render_table, "markdown": report.render_markdown,
            "json": report.render_json}.get(fmt)
    if text is None:
        inputs = [(name, path_input(path)) for name, path in (
            ("measured", measured), ("solution", solution), ("solutions", solutions),
            ("measured-trace", measured_trace)) if path]
        inputs += topology_inputs([load_topology(topology)])
        write_output(report.render_html(result, png, provenance(command, result.topology,
                                                                inputs)), out)
    else:
        write_output(text(result), out)
    if plot is not None:
        write_output(png, plot, "--plot")
    if timeline is not None:
        comp = result.comparisons[0]
        sim = reference_timeline(comp, load_topology(topology))
        write_output(report.timeline_chart(comp, sim), timeline, "--timeline")
    if result.errors:
        sys.stderr.write(f"{len(result.errors)} problem(s) could not be compared: "
                         + "; ".join(f"{e.problem}: {e.error}" for e in result.errors) + "\n")


def _check_options(problem: str | None, measured: Path | None, measured_us: float | None,
                   solution: Path | None, solutions: Path | None, fmt: str,
                   plot: Path | None, measured_trace: Path | None = None) -> None:
    from pkbsim.api import check_compare

    if fmt not in FORMATS:
        raise UsageError(f"--format {fmt}: expected one of {', '.join(FORMATS)}")
    check_compare(problem, measured, measured_us, solution, solutions, measured_trace)
    if plot is not None:
        image_format(plot, "--plot", (".png",))
