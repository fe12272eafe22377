"""``pkbsim inspect FILE|DIR``: what each solution file does, as a table or JSON.

Branches are read under a profile (PKB's: bfloat16 1024 x 1024 inputs, 8 ranks; ``--dtype``,
``--world-size``, ``--shape`` change it). ``--run-log`` reconciles the static findings with
the profiler records of ``pkbsim run``. A missing path, or a lone file that cannot be read or
parsed, is an error (exit 2); in a folder such a file becomes a row with its error, the others
are still inspected, and stderr says how many failed.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from pkbsim.cli.options import Format, Out, format_option, world_size_option
from pkbsim.cli.output import check_writable, write_output
from pkbsim.errors import UsageError

FORMATS = ("table", "json")


def inspect_solutions(
    paths: Annotated[list[Path], typer.Argument(
        help="Solution files (PKB format: Python defining solution()) or folders (every *.py "
             "under them, recursively).")],
    fmt: Annotated[Format, format_option(
        FORMATS, "table or json (schema pkbsim.inspect/1, with evidence lines and call "
                 "sites).")] = Format.table,
    out: Out = None,
    dtype: Annotated[str, typer.Option(
        help="The inputs' dtype the branches are read under (PKB: bfloat16).")] = "bfloat16",
    world_size: Annotated[int, world_size_option(
        "Ranks the branches are read under (PKB's runs: 8).")] = 8,
    shape: Annotated[str, typer.Option(
        help="Shape of each tensor argument, e.g. 1024x1024 (PKB's default).")] = "1024x1024",
    run_log: Annotated[Path | None, typer.Option(
        "--run-log", help="A `pkbsim run` output folder or rank_<r>_profile.json: what ran, "
                          "reconciled with what the code says.")] = None,
) -> None:
    """What each candidate solution does, read from its code: data-movement mechanisms, every
    call that moves data (NCCL, copy engine, rendezvous) marked hot, setup, fallback or unknown
    with the condition that decides it, synchronisation, kernels, overlap, one-shot reads,
    capped grids and uncoalesced peer access, each with the line numbers that show it."""
    inspect_command(paths, fmt.value, out, dtype, world_size, shape, run_log)


def inspect_command(paths: list[Path], fmt: str, out: Path | None, dtype: str = "bfloat16",
                    world_size: int = 8, shape: str = "1024x1024",
                    run_log: Path | None = None) -> None:
    from pkbsim import api

    if fmt not in FORMATS:
        raise UsageError(f"--format {fmt}: expected one of {', '.join(FORMATS)}")
    if out is not None:
        check_writable(out, "--out")
    report = api.inspect(*paths, dtype=dtype, world_size=world_size, shape=shape,
                         run_log=run_log)
    write_output(report.to_json() if fmt == "json" else report.to_text(), out)
    rows = report.result
    failed = [r for r in rows if r.error is not None]
    if failed:
        sys.stderr.write(f"{len(failed)} of {len(rows)} file(s) could not be inspected: "
                         + "; ".join(r.error or "" for r in failed) + "\n")
