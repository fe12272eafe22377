"""The ``pkbsim`` command line. Commands load, compute, render and write; nothing else.

Bad input of any kind ends in one line on stderr and exit code 2.
"""

from __future__ import annotations

import os
import sys
import tempfile
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from pkbsim import __version__
from pkbsim.errors import PkbsimError, UsageError

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  pretty_exceptions_enable=False,
                  help="Communication rooflines for ParallelKernelBench multi-GPU kernels.")
topo_app = typer.Typer(no_args_is_help=True, help="Shipped machine models.")
tasks_app = typer.Typer(no_args_is_help=True, help="Shipped PKB problems.")
app.add_typer(topo_app, name="topo")
app.add_typer(tasks_app, name="tasks")


class Format(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"
    markdown = "markdown"


def _version(value: bool) -> None:
    if value:
        typer.echo(f"pkbsim {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """pkbsim: how fast a multi-GPU kernel could be, how fast it is, and why they differ."""


def parse_sets(items: list[str], option: str = "--set") -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise UsageError(f"{option} {item!r}: expected KEY=VALUE")
        out[key.strip()] = value.strip()
    return out


def write_output(text: str | bytes, out: Path | None, option: str = "--out") -> None:
    """Print, or write ``out`` atomically so a failure never leaves a half-written file."""
    if out is None:
        assert isinstance(text, str)
        sys.stdout.write(text)
        return
    check_writable(out, option)
    out = out.expanduser()
    data = text.encode() if isinstance(text, str) else text
    try:
        fd, tmp = tempfile.mkstemp(dir=out.parent or Path("."), prefix=f".{out.name}.",
                                   suffix=".tmp")
    except OSError as exc:
        raise UsageError(f"{option} {out}: cannot write ({exc.strerror})") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; a written file is the user's
        os.replace(tmp, out)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise UsageError(f"{option} {out}: cannot write ({exc.strerror})") from None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def check_writable(out: Path, option: str) -> None:
    """Fail before any work when ``out`` cannot be written."""
    out = out.expanduser()
    if out.parent and not out.parent.exists():
        raise UsageError(f"{option} {out}: folder {out.parent} does not exist")
    if out.is_dir():
        raise UsageError(f"{option} {out}: is a folder")


@app.command()
def analyze(
    task: Annotated[str | None, typer.Option(
        "--task", "-t", help="Task id, name, alias (e.g. grpo) or YAML path.")] = None,
    all_: Annotated[bool, typer.Option(
        "--all", help="Every shipped task: one row each, a summary, optionally a plot.")] = False,
    topology: Annotated[str, typer.Option(help="Topology name or YAML path.")] = "dgx-h100",
    world_size: Annotated[int | None, typer.Option(
        "--world-size", "-w", help="Ranks (default: the preset's, else the task's).")] = None,
    preset: Annotated[str, typer.Option(
        help="Size preset: pkb (the benchmark's), production (each task's production size), "
             "or a task's preset name.")] = "pkb",
    set_: Annotated[list[str] | None, typer.Option(
        "--set", help="KEY=VALUE: a task parameter, or a dotted topology field "
                      "(scale_up.link_bandwidth_GBps=50). Repeatable.")] = None,
    measured_us: Annotated[float | None, typer.Option(
        help="A measured time (us) to report attainment against.")] = None,
    fmt: Annotated[Format, typer.Option(
        "--format", help="table or json; with --all also csv or markdown.")] = Format.table,
    out: Annotated[Path | None, typer.Option(help="Write here instead of stdout.")] = None,
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
) -> None:
    """Roofline bounds of one task on one topology, or of every task (--all)."""
    if all_ == (task is not None):
        raise UsageError("give either --task NAME or --all")
    if all_:
        if measured_us is not None:
            raise UsageError("--measured-us is for one task (--task), not --all")
        _analyze_all(topology, world_size, preset, parse_sets(set_ or []), fmt, out,
                     filter_ or [], sort, reverse, plot)
        return
    for name, used in (("--filter", bool(filter_)), ("--plot", plot is not None),
                       ("--reverse", reverse), ("--sort", sort != "id")):
        if used:
            raise UsageError(f"{name} works with --all")
    if fmt in (Format.csv, Format.markdown):
        raise UsageError(f"--format {fmt.value} works with --all; one task: table or json")
    from pkbsim.analysis import analyze as run

    assert task is not None
    if out is not None:
        check_writable(out, "--out")
    result = run(task, topology, world_size, preset, parse_sets(set_ or []), measured_us,
                 predict)
    if fmt is Format.json:
        from pkbsim.report.json_report import render

        write_output(render(result), out)
    else:
        from pkbsim.report.table import analysis_table

        write_output(analysis_table(result), out)


def _analyze_all(topology: str, world_size: int | None, preset: str, sets: dict[str, str],
                 fmt: Format, out: Path | None, filters: list[str], sort: str, reverse: bool,
                 plot: Path | None) -> None:
    from pkbsim.analysis import split_topology_overrides
    from pkbsim.overview import overview, parse_filters
    from pkbsim.report import overview_report as report
    from pkbsim.report.plot import image_format, overview_plot
    from pkbsim.topology import load_topology

    parsed = parse_filters(filters)
    fmt_image = image_format(str(plot)) if plot is not None else ""
    if plot is not None:
        check_writable(plot, "--plot")
    if out is not None:
        check_writable(out, "--out")
    topo_sets = split_topology_overrides(sets)
    ov = overview(load_topology(topology, topo_sets), world_size, preset, parsed, sort, reverse,
                  topology_overrides=topo_sets)
    render = {Format.table: report.render_table, Format.json: report.render_json,
              Format.csv: report.render_csv, Format.markdown: report.render_markdown}[fmt]
    write_output(render(ov), out)
    if plot is not None:
        write_output(overview_plot([ov], fmt_image), plot, "--plot")


@app.command()
def simulate(
    task: Annotated[str, typer.Option(
        "--task", "-t", help="Task id, name, alias (e.g. grpo) or YAML path.")],
    strategy: Annotated[str, typer.Option(
        help="nccl_reference (what PKB's reference does), custom_best (the best kernel the "
             "machine allows), or a strategy YAML file.")] = "nccl_reference",
    topology: Annotated[str, typer.Option(help="Topology name or YAML path.")] = "dgx-h100",
    world_size: Annotated[int | None, typer.Option(
        "--world-size", "-w", help="Ranks (default: the preset's, else the task's).")] = None,
    preset: Annotated[str, typer.Option(
        help="Size preset: pkb, production, or a task's preset name.")] = "pkb",
    set_: Annotated[list[str] | None, typer.Option(
        "--set", help="KEY=VALUE: a task parameter, or a dotted topology field "
                      "(scale_up.link_bandwidth_GBps=50). Repeatable.")] = None,
    override: Annotated[list[str] | None, typer.Option(
        "--override", help="OP.KEY=VALUE for one op: mechanism, algorithm, protocol, chunks or "
                           "sms (e.g. a2a_logits.mechanism=tma). Repeatable.")] = None,
    iterations: Annotated[int, typer.Option(
        help="Back-to-back iterations simulated; the time is the steady state.")] = 3,
    trace: Annotated[Path | None, typer.Option(
        help="Write a Chrome/Perfetto trace (JSON) of the timeline here.")] = None,
    gantt: Annotated[Path | None, typer.Option(
        help="Draw the timeline as a Gantt chart here (.png, .svg or .pdf).")] = None,
    fmt: Annotated[Format, typer.Option("--format", help="table or json.")] = Format.table,
    out: Annotated[Path | None, typer.Option(help="Write here instead of stdout.")] = None,
) -> None:
    """Predicted time of one task under a strategy: per-op breakdown, link and SM utilisation,
    critical path; optionally a trace and a Gantt chart."""
    if fmt in (Format.csv, Format.markdown):
        raise UsageError(f"--format {fmt.value}: simulate writes table or json")
    gantt_fmt = _image_format(gantt, "--gantt") if gantt is not None else ""
    for path, option in ((out, "--out"), (trace, "--trace"), (gantt, "--gantt")):
        if path is not None:
            check_writable(path, option)
    from pkbsim.report import sim_report
    from pkbsim.roofline import roofline
    from pkbsim.simulation import run_simulation

    result = run_simulation(task, strategy, topology, world_size, preset,
                            parse_sets(set_ or []), parse_sets(override or [], "--override"),
                            iterations, trace=trace is not None or gantt is not None)
    roof = roofline(result.instance, result.topology)
    if fmt is Format.json:
        write_output(sim_report.render_json(result, roof), out)
    else:
        write_output(sim_report.sim_table(result, roof), out)
    if trace is not None:
        from pkbsim.report.trace import chrome_trace

        write_output(chrome_trace(result), trace, "--trace")
    if gantt is not None:
        from pkbsim.report.gantt import gantt_chart

        write_output(gantt_chart(result, gantt_fmt), gantt, "--gantt")


def _image_format(path: Path, option: str) -> str:
    suffix = path.suffix.lower()
    if suffix not in (".png", ".svg", ".pdf"):
        raise UsageError(f"{option} {path}: expected a file ending in .png, .svg or .pdf")
    return suffix[1:]


@app.command()
def validate(
    gpus: Annotated[int | None, typer.Option(
        help="Use at most N GPUs (default: all present). Cases needing more are waived.")] = None,
    quick: Annotated[bool, typer.Option(
        "--quick", help="Fewer sizes and repeats: the whole suite in a few minutes.")] = False,
    cases: Annotated[str | None, typer.Option(
        help="Only cases whose key matches one of these comma-separated glob patterns "
             "(e.g. 'hbm.*,launch.*').")] = None,
    out: Annotated[Path, typer.Option(
        help="Folder for results.json and each case's log.")] = Path("validation"),
    report: Annotated[Path | None, typer.Option(
        help="Do not measure: compare DIR/results.json with the simulator's predictions on "
             "the uncalibrated (--base) and calibrated topology, and write DIR/report.*.")]
        = None,
    base: Annotated[str | None, typer.Option(
        help="With --report: the uncalibrated topology (default: chosen by GPU name).")] = None,
    calibrated: Annotated[Path | None, typer.Option(
        help="With --report: a calibrated topology file (default: calibrate from the "
             "results in memory).")] = None,
    allow_multicast: Annotated[bool, typer.Option(
        "--allow-multicast", help="Run cases that use NVLink multicast (NVLS). Off by "
                                  "default: multicast can disrupt a shared node.")] = False,
    timeout: Annotated[float | None, typer.Option(
        help="Seconds each case may run (default: each case's own limit).")] = None,
    nnodes: Annotated[int, typer.Option(
        help="Nodes for torchrun cases (multi-node: run this on every node).")] = 1,
    rdzv_endpoint: Annotated[str | None, typer.Option(
        help="HOST:PORT of torchrun's c10d rendezvous, for --nnodes > 1.")] = None,
    list_cases: Annotated[bool, typer.Option(
        "--list", help="List the cases and exit.")] = False,
) -> None:
    """Measure this machine's GPUs (HBM, launches, host copies, peers, NCCL), each case in a
    child process with a timeout; or, with --report, the model's error against a run."""
    if report is not None:
        from pkbsim.validation.report_cmd import report_command

        report_command(report, base, calibrated)
        return
    from pkbsim.validation.validate_cmd import validate_command

    validate_command(gpus=gpus, quick=quick, patterns=cases, out=out,
                     allow_multicast=allow_multicast, timeout_s=timeout, nnodes=nnodes,
                     rdzv_endpoint=rdzv_endpoint, list_only=list_cases)


@app.command()
def calibrate(
    results: Annotated[Path, typer.Argument(help="A validation run's results.json (or its "
                                                 "folder).")],
    out: Annotated[Path, typer.Option(help="Topology file to write (.yaml).")],
    base: Annotated[str | None, typer.Option(
        help="Topology whose unmeasured parameters are kept (default: chosen by GPU "
             "name).")] = None,
    name: Annotated[str | None, typer.Option(
        help="Name of the new topology (default: the --out file's stem).")] = None,
) -> None:
    """Fit latency, bandwidth and efficiency per mechanism to a validation run and write a
    topology file that says where each fitted number came from."""
    from pkbsim.validation.calibrate_cmd import calibrate_command

    calibrate_command(results, out, base, name)


@app.command()
def discover(
    out: Annotated[Path | None, typer.Option(
        help="Topology file to write (default: print it).")] = None,
    from_: Annotated[Path | None, typer.Option(
        "--from", help="Parse captured output instead of asking this machine: a results.json "
                       "with a topology.discover case, or a saved `nvidia-smi topo -m`.")]
        = None,
    base: Annotated[str | None, typer.Option(
        help="Topology whose per-GPU numbers are reused (default: chosen by GPU name).")]
        = None,
    name: Annotated[str | None, typer.Option(help="Name of the new topology.")] = None,
) -> None:
    """Read this machine's GPUs and links (pynvml, `nvidia-smi topo -m`) into a topology file."""
    from pkbsim.validation.discover_cmd import discover_command

    discover_command(out, from_, base, name)


@app.command("run")
def run_(
    pkb_root: Annotated[Path, typer.Option(
        "--pkb-root", help="Your ParallelKernelBench checkout (reference/, utils/).")],
    problem: Annotated[str, typer.Option(
        help="Problem number (1) or stem (1_allreduce) in PKB_ROOT/reference/.")],
    solution: Annotated[Path, typer.Option(
        help="The candidate: a Python file defining solution(...), as PKB's solutions do.")],
    world_size: Annotated[int | None, typer.Option(
        "--world-size", "-w", help="Ranks (default: every GPU; 2 with --device cpu).")] = None,
    out: Annotated[Path, typer.Option(
        help="Folder for logs/problem_<stem>/<backend>/rank_*_perf.json (PKB's layout) and "
             "runs/ (console logs, rank status).")] = Path("pkb-run"),
    timeout: Annotated[float, typer.Option(
        help="Seconds each variant may run; past it, a hang: its processes are killed.")]
        = 600.0,
    device: Annotated[str, typer.Option(help="cuda (NCCL) or cpu (gloo).")] = "cuda",
) -> None:
    """Check a candidate against PKB's reference and time both, each under torchrun with PKB's
    convention (5 trials, atol = rtol = 1e-2; 500 warm-up and 100 timed iterations); reports
    crash, hang, wrong output and time per rank."""
    from pkbsim.compare.run_cmd import run_command

    run_command(pkb_root, problem, solution, world_size, out, timeout, device)


@app.command("inspect")
def inspect_solutions(
    paths: Annotated[list[Path], typer.Argument(
        help="Solution files (PKB format: Python defining solution()) or folders (every *.py "
             "under them, recursively).")],
    fmt: Annotated[Format, typer.Option(
        "--format", help="table or json (schema pkbsim.inspect/1, with evidence lines).")]
        = Format.table,
    out: Annotated[Path | None, typer.Option(help="Write here instead of stdout.")] = None,
) -> None:
    """What each candidate solution does, read from its code: data-movement mechanisms,
    torch.distributed calls on the hot path, synchronisation, kernels, overlap, one-shot reads,
    capped grids and uncoalesced peer access, each with the line numbers that show it."""
    from pkbsim.compare.inspect_cmd import inspect_command

    inspect_command(paths, fmt.value, out)


class CompareFormat(str, Enum):
    table = "table"
    markdown = "markdown"
    html = "html"
    json = "json"


@app.command("compare")
def compare(
    problem: Annotated[str | None, typer.Option(
        "--problem", "-p", help="One problem (id, name, alias); without it, every problem "
                                "in --measured.")] = None,
    measured: Annotated[Path | None, typer.Option(
        help="PKB logs folder (problem_<stem>/<backend>/rank_<r>_perf.json) or CSV "
             "(problem,variant,time_us[,rank]).")] = None,
    measured_us: Annotated[float | None, typer.Option(
        help="With --problem: one candidate's measured time (us).")] = None,
    solution: Annotated[Path | None, typer.Option(
        help="With --problem: the candidate's solution file, inspected for the causes.")] = None,
    solutions: Annotated[Path | None, typer.Option(
        help="Folder of solution files named <problem stem>_<backend>.py.")] = None,
    topology: Annotated[str, typer.Option(help="Topology name or YAML path.")] = "dgx-h100",
    world_size: Annotated[int | None, typer.Option(
        "--world-size", "-w", help="Ranks (default: the ranks measured, else the preset's).")]
        = None,
    preset: Annotated[str, typer.Option(help="Size preset (pkb: the benchmark's).")] = "pkb",
    fmt: Annotated[CompareFormat, typer.Option(
        "--format", help="table, markdown, html (plots embedded) or json "
                         "(schema pkbsim.compare/1).")] = CompareFormat.table,
    out: Annotated[Path | None, typer.Option(help="Write here instead of stdout.")] = None,
    plot: Annotated[Path | None, typer.Option(
        help="Also write the attainment and gap-cause plot here (.png).")] = None,
    timeline: Annotated[Path | None, typer.Option(
        help="With --problem: the simulated timeline of PKB's reference with t_roof and each "
             "measured time marked (.png).")] = None,
) -> None:
    """Measured kernels against the roofline and the simulator: attainment, speedup over
    PKB's reference, and the gap split into ranked causes with the fix to try for each."""
    from pkbsim.compare.compare_cmd import compare_command

    compare_command(problem, measured, measured_us, solution, solutions, topology, world_size,
                    preset, fmt.value, out, plot, timeline=timeline)


# pkbsim sweep: the command lives in its module (typer only at import; the engine loads lazily)
from pkbsim.planning.sweep_cmd import sweep as _sweep  # noqa: E402

app.command("sweep")(_sweep)

# pkbsim plan: derived answers (threshold, crossover, sm-split, latency-exit)
from pkbsim.planning.plan_cmd import plan_app as _plan_app  # noqa: E402

app.add_typer(_plan_app, name="plan")


@topo_app.command("list")
def topo_list() -> None:
    """Shipped topologies, one line each."""
    from pkbsim.report.catalog import topology_list

    write_output(topology_list(), None)


@topo_app.command("show")
def topo_show(name: Annotated[str, typer.Argument(help="Topology name or YAML path.")]) -> None:
    """Every parameter of one topology, with units and sources."""
    from pkbsim.report.catalog import topology_detail
    from pkbsim.topology import load_topology

    write_output(topology_detail(load_topology(name)), None)


@tasks_app.command("list")
def tasks_list() -> None:
    """Shipped tasks, one line each."""
    from pkbsim.report.catalog import task_list

    write_output(task_list(), None)


@tasks_app.command("show")
def tasks_show(
    name: Annotated[str, typer.Argument(help="Task id, name, alias or YAML path.")],
    world_size: Annotated[int | None, typer.Option("--world-size", "-w")] = None,
    preset: Annotated[str, typer.Option()] = "pkb",
) -> None:
    """One task: parameters, presets, constraints and its ops at a world size."""
    from pkbsim.report.catalog import task_detail
    from pkbsim.task.loader import instantiate, load_task

    spec = load_task(name)
    write_output(task_detail(spec, instantiate(spec, world_size, preset)), None)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: run the app; turn every input error into one line and exit 2."""
    try:
        code = app(args=argv, prog_name="pkbsim", standalone_mode=False)
        if isinstance(code, int) and not isinstance(code, bool) and code:
            sys.exit(code)
    except PkbsimError as exc:
        _fail(exc.one_line())
    except BrokenPipeError:
        sys.exit(0)
    except Exception as exc:
        # typer's click (vendored in new releases, the click package in old ones): matched by
        # name so both work.
        name = type(exc).__name__
        if name in ("NoArgsIsHelpError", "NoArgsIsHelp"):
            ctx = getattr(exc, "ctx", None)
            sys.stdout.write(ctx.get_help() + "\n" if ctx else "")
            sys.exit(0)
        if name == "Exit":
            sys.exit(getattr(exc, "exit_code", 0))
        if name == "Abort":
            _fail("interrupted", code=130)
        if hasattr(exc, "format_message"):
            _fail(exc.format_message(), code=getattr(exc, "exit_code", 2) or 2)
        raise


def _fail(message: str, code: int = 2) -> None:
    sys.stderr.write(f"pkbsim: error: {' '.join(message.split())}\n")
    sys.exit(code)
