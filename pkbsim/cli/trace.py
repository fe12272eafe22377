"""``pkbsim trace``: record what PyTorch dispatches for PKB references or a function of your
own, on CPU (fake tensors where the code allows, else real ones on W gloo ranks)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pkbsim.cli.options import Sets, number_option, world_size_option
from pkbsim.cli.output import write_output


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
    rank: Annotated[int, typer.Option(
        help="The rank whose trace is written (negative counts from the last: -1 is W - 1, "
             "the busiest rank of a causal ring).")] = 0,
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
    from pkbsim import api
    from pkbsim.cli.output import parse_sets
    from pkbsim.trace.launch import checkout_commit

    report = api.record_trace(target, pkb_root=pkb_root, task=task, world_size=world_size,
                              sets=parse_sets(set_ or []), inputs=inputs, mode=mode,
                              timeout=timeout, out=out, programs=programs, commit=checkout_commit,
                              rank=rank)
    write_output(report.to_text(), None)
    if not report.ok:
        raise typer.Exit(1)
