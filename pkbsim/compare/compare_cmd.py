"""``pkbsim compare``: measured kernels against the roofline, the simulator and their causes
(CLI glue: loads inputs, calls pkbsim.compare.report, writes the results).

One problem: ``--problem P`` with ``--measured-us T`` (one candidate) or ``--measured LOGS|CSV``
(its reference and candidates), optionally ``--solution FILE`` to inspect the candidate.
A directory: ``--measured LOGS|CSV`` without ``--problem``, every problem in it, optionally
``--solutions DIR`` holding ``<problem stem>_<backend>.py``. In directory mode a problem that
cannot be compared (a world size its task refuses, ...) becomes an error row; the others are
still reported.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

from pkbsim.compare.inspect import Inspection, inspect_file
from pkbsim.compare.measured import MeasuredSet, Measurement, from_value, load_measured
from pkbsim.compare.report import (
    Comparison,
    DirectoryComparison,
    ProblemError,
    compare_problem,
    comparison_plot,
    render_html,
    render_json,
    render_markdown,
    render_table,
)
from pkbsim.errors import PkbsimError, UsageError
from pkbsim.task.loader import instantiate, load_task
from pkbsim.topology import load_topology
from pkbsim.topology.schema import Topology

FORMATS = ("table", "markdown", "html", "json")


def compare_command(problem: str | None, measured: Path | None, measured_us: float | None,
                    solution: Path | None, solutions: Path | None, topology: str,
                    world_size: int | None, preset: str, fmt: str, out: Path | None,
                    plot: Path | None, *, simulate_fixes: bool = True,
                    timeline: Path | None = None) -> None:
    from pkbsim.cli import check_writable, write_output

    _check_options(problem, measured, measured_us, solution, solutions, fmt, plot)
    if timeline is not None and (problem is None or timeline.suffix.lower() != ".png"):
        raise UsageError("--timeline needs --problem and a file ending in .png")
    for path, option in ((out, "--out"), (plot, "--plot"), (timeline, "--timeline")):
        if path is not None:
            check_writable(path, option)
    topo = load_topology(topology)
    if problem is not None:
        result = _one_problem(problem, measured, measured_us, solution, solutions, topo,
                              world_size, preset, simulate_fixes)
    else:
        assert measured is not None
        result = _directory(load_measured(measured), solutions, topo, world_size, preset,
                            simulate_fixes)
    png = comparison_plot(result) if fmt == "html" or plot is not None else b""
    text = {"table": render_table, "markdown": render_markdown, "json": render_json}.get(fmt)
    write_output(text(result) if text else render_html(result, png), out)
    if plot is not None:
        write_output(png, plot, "--plot")
    if timeline is not None:
        write_output(timeline_chart(result.comparisons[0], topology, preset), timeline,
                     "--timeline")
    if result.errors:
        sys.stderr.write(f"{len(result.errors)} problem(s) could not be compared: "
                         + "; ".join(f"{e.problem}: {e.error}" for e in result.errors) + "\n")


def timeline_chart(comp: Comparison, topology: str, preset: str) -> bytes:
    """The simulator's timeline of PKB's reference for this problem (nccl_reference), with
    t_roof and each measured variant's time marked from the start of the steady iteration."""
    from pkbsim.report.gantt import gantt_chart
    from pkbsim.simulation import run_simulation

    sim = run_simulation(comp.problem, "nccl_reference", topology, comp.world_size, preset,
                         trace=True)
    marks = (("t_roof", comp.t_roof_us),
             *((f"measured {v.variant}", v.measured_us) for v in comp.variants))
    return gantt_chart(sim, "png", marks)


def _check_options(problem: str | None, measured: Path | None, measured_us: float | None,
                   solution: Path | None, solutions: Path | None, fmt: str,
                   plot: Path | None) -> None:
    if fmt not in FORMATS:
        raise UsageError(f"--format {fmt}: expected one of {', '.join(FORMATS)}")
    if (measured is None) == (measured_us is None):
        raise UsageError("give either --measured LOGS|CSV or --measured-us TIME")
    if measured_us is not None and problem is None:
        raise UsageError("--measured-us needs --problem")
    if solution is not None and problem is None:
        raise UsageError("--solution needs --problem (a directory takes --solutions DIR)")
    if solution is not None and solutions is not None:
        raise UsageError("give --solution FILE or --solutions DIR, not both")
    if solutions is not None and not solutions.expanduser().is_dir():
        raise UsageError("--solutions: not a directory", file=str(solutions))
    if plot is not None and not plot.name.lower().endswith(".png"):
        raise UsageError(f"--plot {plot}: expected a file ending in .png")


def _one_problem(problem: str, measured: Path | None, measured_us: float | None,
                 solution: Path | None, solutions: Path | None, topo: Topology,
                 world_size: int | None, preset: str, simulate_fixes: bool
                 ) -> DirectoryComparison:
    if measured_us is not None:
        found = [from_value(measured_us, problem)]
        source = "--measured-us"
    else:
        assert measured is not None
        data = load_measured(measured)
        found = data.for_problem(problem)
        source = data.source
        if not found:
            raise UsageError(f"no measured times for problem {problem!r} (it has "
                             f"{', '.join(data.problems())})", file=str(measured))
    inspections = _solution_for(found, solution) if solution is not None else (
        _from_folder(found, solutions) if solutions is not None else {})
    comparison = _compare(found, inspections, topo, world_size, preset, simulate_fixes)
    return DirectoryComparison(source, topo.name, (comparison,))


def _directory(data: MeasuredSet, solutions: Path | None, topo: Topology,
               world_size: int | None, preset: str, simulate_fixes: bool
               ) -> DirectoryComparison:
    done: list[Comparison] = []
    errors: list[ProblemError] = []
    for problem in data.problems():
        found = data.for_problem(problem)
        try:
            inspections = _from_folder(found, solutions) if solutions is not None else {}
            done.append(_compare(found, inspections, topo, world_size, preset,
                                 simulate_fixes))
        except PkbsimError as exc:
            errors.append(ProblemError(problem, exc.one_line()))
    if not done:
        raise UsageError("no problem could be compared: " + "; ".join(
            f"{e.problem}: {e.error}" for e in errors), file=data.source)
    return DirectoryComparison(data.source, topo.name, tuple(done), tuple(errors))


def _compare(found: list[Measurement], inspections: Mapping[str, Inspection], topo: Topology,
             world_size: int | None, preset: str, simulate_fixes: bool) -> Comparison:
    """The task at ``world_size``, else at the ranks measured, else at the preset's."""
    ranks = next((m.world_size for m in found if m.world_size is not None), None)
    w = world_size if world_size is not None else ranks
    inst = instantiate(load_task(found[0].problem), w, preset)
    return compare_problem(inst, topo, found, inspections, simulate_fixes=simulate_fixes)


def _solution_for(found: list[Measurement], solution: Path) -> dict[str, Inspection]:
    """``--solution``: the one candidate's, or the candidate named by the file's suffix."""
    candidates = [m for m in found if not m.is_reference]
    if not candidates:
        raise UsageError("--solution given but only the reference was measured",
                         file=str(solution))
    if len(candidates) == 1:
        return {candidates[0].variant: inspect_file(solution)}
    stem = solution.stem
    named = [m for m in candidates if stem.endswith(f"_{m.variant}")]
    if not named:
        raise UsageError("several candidates measured (" + ", ".join(
            m.variant for m in candidates) + "): name the file <problem>_<backend>.py",
            file=str(solution))
    return {named[0].variant: inspect_file(solution)}


def _from_folder(found: list[Measurement], folder: Path) -> dict[str, Inspection]:
    """``<problem stem>_<backend>.py`` in ``folder`` for each candidate that has one."""
    out = {}
    for m in found:
        path = folder.expanduser() / f"{m.problem}_{m.variant}.py"
        if not m.is_reference and path.is_file():
            out[m.variant] = inspect_file(path)
    return out
