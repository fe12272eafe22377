"""The ``pkbsim`` command line. Commands parse options, call the core, render and write.

Every command is a plain function in a module of its own, registered below in one table; bad
input of any kind ends in one line on stderr and exit code 2.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from typing import Annotated, Any

import typer

from pkbsim import __version__
from pkbsim.cli import (
    analyze,
    calibrate,
    catalog,
    compare,
    discover,
    inspect,
    limits,
    plan,
    run,
    simulate,
    sweep,
    trace,
    validate,
)
from pkbsim.errors import PkbsimError, shorten
from pkbsim.report.width import output_width

Command = Callable[..., Any]

# (name, function) in the order ``pkbsim --help`` lists them
COMMANDS: tuple[tuple[str, Command], ...] = (
    ("analyze", analyze.analyze),
    ("simulate", simulate.simulate),
    ("validate", validate.validate),
    ("calibrate", calibrate.calibrate),
    ("discover", discover.discover),
    ("run", run.run_command),
    ("inspect", inspect.inspect_solutions),
    ("compare", compare.compare),
    ("sweep", sweep.sweep),
    ("trace", trace.trace),
    ("limits", limits.limits),
)
# (name, help, its commands)
GROUPS: tuple[tuple[str, str, tuple[tuple[str, Command], ...]], ...] = (
    ("topo", "Shipped machine models.",
     (("list", catalog.topo_list), ("show", catalog.topo_show))),
    ("tasks", "Shipped PKB problems.",
     (("list", catalog.tasks_list), ("show", catalog.tasks_show))),
    ("plan", "Derived answers: threshold sizes, crossovers, the SM split, the latency exit.",
     (("threshold", plan.threshold), ("crossover", plan.crossover),
      ("sm-split", plan.sm_split), ("latency-exit", plan.latency_exit))),
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"pkbsim {__version__}")
        raise typer.Exit()


def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """pkbsim: how fast a multi-GPU kernel could be, how fast it is, and why they differ."""


def build_app() -> typer.Typer:
    """The typer app with every command and group of the tables above."""
    root = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                       pretty_exceptions_enable=False,
                       help="Communication rooflines for ParallelKernelBench multi-GPU kernels.")
    root.callback()(_root)
    for name, command in COMMANDS:
        root.command(name)(command)
    for group, text, commands in GROUPS:
        sub = typer.Typer(no_args_is_help=True, help=text)
        for name, command in commands:
            sub.command(name)(command)
        root.add_typer(sub, name=group)
    return root


app = build_app()


def main(argv: list[str] | None = None) -> None:
    """Console entry point: run the app; turn every input error into one line and exit 2."""
    try:
        with output_width(terminal_columns()):
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


def terminal_columns() -> int | None:
    """The width tables fit: $COLUMNS when set, else the terminal's when stdout is one; None
    (each table's own width) for a pipe or a file."""
    text = os.environ.get("COLUMNS", "").strip()
    if text.isdigit() and int(text) > 0:
        return int(text)
    try:
        return shutil.get_terminal_size().columns if sys.stdout.isatty() else None
    except (AttributeError, ValueError, OSError):
        return None


def _fail(message: str, code: int = 2) -> None:
    sys.stderr.write(f"pkbsim: error: {' '.join(shorten(w) for w in message.split())}\n")
    sys.exit(code)
