"""Options several commands share, declared once: the flag names, types and the usual help.

A command takes an option as ``name: Annotated[TYPE, option(...)] = DEFAULT``; where its help
differs (``--world-size`` has a different default per command), it passes its own text.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from pkbsim import bounds
from pkbsim.errors import UsageError


class Format(str, Enum):
    """Every output format; each command accepts some (its ``--format`` help lists which)."""

    table = "table"
    json = "json"
    csv = "csv"
    markdown = "markdown"
    html = "html"


def format_option(accepted: tuple[str, ...], help: str) -> Any:
    """``--format``, its metavar listing what this command accepts."""
    return typer.Option("--format", metavar="<" + "|".join(accepted) + ">", help=help)


def require_format(fmt: Format, accepted: tuple[str, ...], why: str | None = None) -> None:
    """A usage error unless ``fmt`` is one of ``accepted``."""
    if fmt.value not in accepted:
        raise UsageError(f"--format {fmt.value}: " + (why or "expected one of "
                                                      + ", ".join(accepted)))


def bounded(quantity: str) -> Callable[..., Any]:
    """An option callback: the value (each value, for a list) inside ``quantity``'s range, or
    one error naming the option, the value and the range (pkbsim.bounds)."""
    def callback(param: typer.CallbackParam, value: Any) -> Any:
        name = param.opts[0] if param.opts else str(param.name)
        if value is None:
            return value
        if isinstance(value, (list, tuple)):
            return [bounds.check_option(v, quantity, name) for v in value]
        return bounds.check_option(value, quantity, name)

    return callback


def number_option(quantity: str, help: str, *flags: str) -> Any:
    """An int or float option checked against ``quantity``."""
    return typer.Option(*flags, help=help, callback=bounded(quantity))


def world_size_option(help: str | None) -> Any:
    return typer.Option("--world-size", "-w", help=help, callback=bounded("world_size"))


def sets_option(help: str) -> Any:
    return typer.Option("--set", help=help)


TASK_HELP = "Task id, name, alias (e.g. grpo) or YAML path."
TOPOLOGY_HELP = "Topology name or YAML path."
SET_HELP = ("KEY=VALUE: a task parameter, or a dotted topology field "
            "(scale_up.bandwidth_GBps=900: NVLink per GPU per direction; "
            "scale_up.link_bandwidth_GBps=50: per link; 'pkbsim topo show' lists the fields). "
            "Repeatable.")
IMAGE_HELP = "(.png, .svg or .pdf)"

Task = Annotated[str, typer.Option("--task", "-t", help=TASK_HELP)]
OptionalTask = Annotated[str | None, typer.Option("--task", "-t", help=TASK_HELP)]
Topology = Annotated[str, typer.Option(help=TOPOLOGY_HELP)]
Sets = Annotated[list[str] | None, sets_option(SET_HELP)]
Out = Annotated[Path | None, typer.Option(help="Write here instead of stdout.")]
TraceOnDemand = Annotated[bool, typer.Option(
    "--trace-on-demand/--no-trace-on-demand",
    help="Where no shipped trace is at this instance, trace PKB's reference at it (needs torch "
         "and --pkb-root or PKB_ROOT; cached; PKBSIM_TRACE_ON_DEMAND=0 also turns it off).")]
PkbRoot = Annotated[Path | None, typer.Option(
    help="A ParallelKernelBench checkout for tracing on demand (default: PKB_ROOT).")]
