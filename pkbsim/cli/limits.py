"""``pkbsim limits``: what ranges numbers must fall in, and how much work one command may do."""

from __future__ import annotations

from typing import Annotated

from pkbsim.cli.options import Format, format_option, require_format
from pkbsim.cli.output import write_output

FORMATS = ("table", "markdown")


def limits(
    fmt: Annotated[Format, format_option(FORMATS, "table or markdown.")] = Format.table,
) -> None:
    """The range of every kind of number pkbsim accepts, and its bounds on work (simulated
    events, sweep points, file sizes, nesting), with the variable that raises each."""
    from pkbsim.bounds import QUANTITIES
    from pkbsim.limits import LIMITS
    from pkbsim.report import limits_report

    require_format(fmt, FORMATS)
    render = limits_report.render_markdown if fmt is Format.markdown else \
        limits_report.render_table
    write_output(render(tuple(QUANTITIES.values()), LIMITS), None)
