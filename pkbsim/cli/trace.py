"""``pkbsim trace``: record what PyTorch dispatches for PKB references or a function of your
own, on CPU (fake tensors where the code allows, else real ones on W gloo ranks)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Annotated

import typer

from pkbsim.cli.options import Sets, number_option, world_size_option
from pkbsim.cli.output import write_output
from pkbsim.errors import UsageError


def trace(
    target: Annotated[str | None, typer.Argument(
        help="FILE.py:FUNCTION to trace (your own function; FILE.py also defines "
             "make_inputs(rank, world_size, **params) returning its arguments).")] = None,
    pkb_root: Annotated[Path | None, typer.Option(
        help="A ParallelKernelBench checkout: trace its references (with --task).")] = None,
    task: Annotated[str | None, typer.Option(
        "--task", "-t", help="With --pkb-root: problem ids or task names, comma-separated, or "
                             "'all'. With FILE.py:FUNCTION: the task whose reference programs "
                             "--programs adds it to.")] = None,
    world_size: Annotated[int, world_size_option("Ranks traced.")] = 1,
    set_: Sets = None,
    inputs: Annotated[str, typer.Option(help="The inputs function in FILE.py.")
                      ] = "make_inputs",
    mode: Annotated[str, typer.Option(
        help="fake (fake tensors, one process, any size; fails on code that reads values), "
             "real (CPU tensors on W gloo ranks), auto (fake, then real where needed).")
                    ] = "auto",
    timeout: Annotated[float, number_option(
        "seconds", "Seconds each target may run before it is stopped.")] = 300.0,
    out: Annotated[Path, typer.Option(help="Folder for the traces (one JSON per target).")
                   ] = Path("traces"),
    programs: Annotated[Path | None, typer.Option(
        help="Also fold each trace into <task>.json reference programs in this folder "
             "(tasks/traces is the shipped one).")] = None,
) -> None:
    """Trace PyTorch references (PKB's, from --pkb-root) or your own torch.distributed
    function at a world size and size, on CPU; prints one line per target."""
    from pkbsim.cli.output import parse_sets
    from pkbsim.trace.launch import MODES, TraceJob, run_trace

    if mode not in MODES:
        raise UsageError(f"--mode {mode!r}: expected one of {', '.join(MODES)}")
    sets = parse_sets(set_ or [])
    if (target is None) == (pkb_root is None):
        raise UsageError("give FILE.py:FUNCTION or --pkb-root (with --task), not both")
    if pkb_root is not None:
        problems = _problems(task)
        unknown = sorted(set(sets) - {"M", "N"})
        if unknown:
            raise UsageError(f"--set {unknown[0]}: PKB's inputs take M and N (its --m, --n)")
        job = TraceJob(world_size, out, pkb_root, problems, int(sets.get("M", 1024)),
                       int(sets.get("N", 1024)), _commit(pkb_root), timeout_s=timeout,
                       mode=mode)
    else:
        assert target is not None
        job = TraceJob(world_size, out, function=target, inputs=inputs,
                       sets=tuple(f"{k}={v}" for k, v in sets.items()), timeout_s=timeout,
                       mode=mode)
    outcomes = run_trace(job)
    lines = []
    for o in outcomes:
        lines.append(f"{o.target}: {o.status} ({o.seconds:.1f} s)"
                     + (f" {o.path}" if o.path else f": {o.error}"))
    if programs is not None:
        from pkbsim.trace.fold import fold_into

        for line in fold_into(programs, [o.path for o in outcomes if o.path],
                              task if target else None):
            lines.append(line)
    write_output("\n".join(lines) + "\n", None)
    if any(o.status != "ok" for o in outcomes):
        raise typer.Exit(1)


def _problems(task: str | None) -> tuple[int, ...]:
    if not task:
        raise UsageError("--pkb-root needs --task (ids or names, comma-separated, or all)")
    if task.strip() == "all":
        return ()  # every reference in the checkout
    from pkbsim.task.loader import load_task

    return tuple(load_task(name.strip()).id for name in task.split(",") if name.strip())


def _commit(root: Path) -> str:
    """The checkout's commit, when it is a git work tree (else the empty string)."""
    try:
        done = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""
