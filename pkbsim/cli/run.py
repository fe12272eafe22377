"""``pkbsim run``: PKB's reference and a candidate, checked and timed under torchrun; a table.

Exit code 0 when both are ok, 1 when either is wrong, crashed or hung, 2 for a bad option, 130
on Ctrl-C or SIGTERM (the children are killed first). Progress goes to stderr, the table to
stdout.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from pkbsim.cli.options import number_option, world_size_option
from pkbsim.cli.output import write_output
from pkbsim.cli.signals import sigterm_as_interrupt


def run_command(
    pkb_root: Annotated[Path, typer.Option(
        "--pkb-root", help="Your ParallelKernelBench checkout (reference/, utils/).")],
    problem: Annotated[str, typer.Option(
        help="Problem number (1) or stem (1_allreduce) in PKB_ROOT/reference/.")],
    solution: Annotated[Path, typer.Option(
        help="The candidate: a Python file defining solution(...), as PKB's solutions do.")],
    world_size: Annotated[int | None, world_size_option(
        "Ranks (default: every GPU; 2 with --device cpu).")] = None,
    out: Annotated[Path, typer.Option(
        help="Folder for logs/problem_<stem>/<backend>/rank_*_perf.json (PKB's layout) and "
             "runs/ (console logs, rank status).")] = Path("pkb-run"),
    timeout: Annotated[float, number_option(
        "seconds", "Seconds each variant may run; past it, a hang: its processes are killed.")]
        = 600.0,
    device: Annotated[str, typer.Option(help="cuda (NCCL) or cpu (gloo).")] = "cuda",
    profile_iters: Annotated[int, typer.Option(
        "--profile-iters", help="Calls profiled after timing, into "
        "rank_<r>_profile.json (kernels, NCCL kernels, memcpys, CUDA runtime calls per call); "
        "0: none.")] = 10,
) -> None:
    """Check a candidate against PKB's reference and time both, each under torchrun with PKB's
    convention (5 trials, atol = rtol = 1e-2; 500 warm-up and 100 timed iterations); reports
    crash, hang, wrong output and time per rank; then profiles --profile-iters calls of each
    to record which kernels, NCCL kernels and memcpys ran."""
    from pkbsim.pkb import runner
    from pkbsim.report.run_report import result_table

    options = runner.RunOptions(world_size=world_size, device=device, timeout_s=timeout,
                                profile_iters=profile_iters)

    def started(backend: str, console: Path) -> None:
        sys.stderr.write(f"pkbsim run: {backend} (log {console})\n")
        sys.stderr.flush()

    try:
        with sigterm_as_interrupt():  # a batch system's SIGTERM kills the children too
            result = runner.run_problem(pkb_root, problem, solution, out, options, on_start=started)
    except KeyboardInterrupt:
        sys.stderr.write("pkbsim: interrupted; the run's processes were killed\n")
        raise SystemExit(130) from None
    write_output(result_table(result, device), None)
    if any(v.status != "ok" for v in (result.reference, result.candidate)):
        raise SystemExit(1)
