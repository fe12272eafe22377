"""``pkbsim inspect FILE|DIR``: what each solution file does, as a table or JSON.

A missing path, or a lone file that cannot be read or parsed, is an error (exit 2); in a folder
such a file becomes a row with its error, the others are still inspected, and stderr says how
many failed.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from pkbsim.cli.options import Format, Out, format_option
from pkbsim.cli.output import check_writable, write_output
from pkbsim.errors import UsageError

FORMATS = ("table", "json")


def inspect_solutions(
    paths: Annotated[list[Path], typer.Argument(
        help="Solution files (PKB format: Python defining solution()) or folders (every *.py "
             "under them, recursively).")],
    fmt: Annotated[Format, format_option(
        FORMATS, "table or json (schema pkbsim.inspect/1, with evidence lines).")]
        = Format.table,
    out: Out = None,
) -> None:
    """What each candidate solution does, read from its code: data-movement mechanisms,
    torch.distributed calls on the hot path, synchronisation, kernels, overlap, one-shot reads,
    capped grids and uncoalesced peer access, each with the line numbers that show it."""
    inspect_command(paths, fmt.value, out)


def inspect_command(paths: list[Path], fmt: str, out: Path | None) -> None:
    from pkbsim.inspection import inspect_path
    from pkbsim.report.inspect_report import render_json, render_table

    if fmt not in FORMATS:
        raise UsageError(f"--format {fmt}: expected one of {', '.join(FORMATS)}")
    if out is not None:
        check_writable(out, "--out")
    if not paths:
        raise UsageError("give at least one solution file or folder")
    rows = [row for path in paths for row in inspect_path(path)]
    write_output(render_json(rows) if fmt == "json" else render_table(rows), out)
    failed = [r for r in rows if r.error is not None]
    if failed:
        sys.stderr.write(f"{len(failed)} of {len(rows)} file(s) could not be inspected: "
                         + "; ".join(r.error or "" for r in failed) + "\n")
