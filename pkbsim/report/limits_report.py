"""``pkbsim limits``: the range of every kind of number pkbsim accepts, and the bounds on work
with the variables that raise them, as a table or Markdown."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table

from pkbsim.bounds import Quantity
from pkbsim.limits import Limit
from pkbsim.report.text import markdown_table, to_text

RANGE_HEAD = ("quantity", "accepted", "what")
LIMIT_HEAD = ("limit", "default", "now", "raise it with", "on")


def _range_rows(quantities: Sequence[Quantity]) -> list[list[str]]:
    return [[q.name, q.describe(), q.what] for q in quantities]


def _limit_rows(limits: Sequence[Limit]) -> list[list[str]]:
    return [[lim.name, lim.described or f"{lim.default:,}", f"{lim.value:,}", lim.env, lim.what]
            for lim in limits]


def render_table(quantities: Sequence[Quantity], limits: Sequence[Limit]) -> str:
    ranges = Table(title="Numbers pkbsim accepts (options, --set, data files, results, logs)",
                   title_justify="left", show_edge=False, pad_edge=False)
    for col in RANGE_HEAD:
        ranges.add_column(col)
    for row in _range_rows(quantities):
        ranges.add_row(*row)
    work = Table(title="Bounds on work (an environment variable raises each)",
                 title_justify="left", show_edge=False, pad_edge=False)
    for col in LIMIT_HEAD:
        work.add_column(col, justify="right" if col in ("default", "now") else "left")
    for row in _limit_rows(limits):
        work.add_row(*row)
    return to_text(ranges, "", work)


def render_markdown(quantities: Sequence[Quantity], limits: Sequence[Limit]) -> str:
    lines = ["Numbers pkbsim accepts:", "", *markdown_table(RANGE_HEAD, _range_rows(quantities)),
             "", "Bounds on work:", "",
             *markdown_table(LIMIT_HEAD[:2] + LIMIT_HEAD[3:],
                             [r[:2] + r[3:] for r in _limit_rows(limits)])]
    return "\n".join(lines) + "\n"
