"""Text helpers every renderer shares: rich objects to a string, tables that fit a width,
Markdown tables, CSV and JSON numbers."""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Sequence

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from pkbsim.report.width import current_width, width_for
from pkbsim.units import US

WIDTH = 132
MAX_WORD = 30  # a longer word in a text cell may fold; a header word or a number never does


def to_text(*renderables: object, width: int = WIDTH, keep: int = 1) -> str:
    """Render rich objects to a string (the CLI decides where it goes), at the terminal's width
    when the CLI set one (pkbsim.report.width), else ``width``. A table wider than that is
    fitted (:func:`fit_table`, repeating its first ``keep`` columns). Text is shown as it is:
    no markup, emoji codes or highlighting, since cells hold file names, error messages and
    candidates' output ("[/x]" must print, not fail)."""
    buffer = io.StringIO()
    console = Console(file=buffer, width=width_for(width), force_terminal=False,
                      color_system=None, soft_wrap=False, markup=False, emoji=False,
                      highlight=False)
    for item in renderables:
        if isinstance(item, Table):
            for i, block in enumerate(fit_table(console, item, keep)):
                if i:
                    console.print("")
                console.print(block)
        else:
            console.print(item)
    return buffer.getvalue()


def fit_table(console: Console, table: Table, keep: int = 1) -> list[Table]:
    """``table`` as tables no wider than the console: unchanged when it fits; else each column
    gets at least its longest header word or (up to MAX_WORD) word, a right-aligned (numeric)
    column its widest cell, text columns wrap, and the columns that still do not fit move to
    further tables, each repeating the first ``keep`` (the key: op, name, the varied axes)."""
    columns = table.columns
    if table.expand or not columns:
        return [table]
    width = console.width
    options = console.options.update_width(width)
    lows, highs = [], []
    for column in columns:
        cells = [column.header, *column.cells] if table.show_header else list(column.cells)
        sizes = [Measurement.get(console, options, cell) for cell in cells]
        header = Measurement.get(console, options, column.header).minimum
        word = max((m.minimum for m in sizes[1 if table.show_header else 0:]), default=1)
        high = max((m.maximum for m in sizes), default=1)
        low = high if column.no_wrap or column.justify == "right" else \
            max(header, min(word, MAX_WORD), 1)
        lows.append(min(low, high))
        highs.append(high)
    if _total(table, highs, range(len(columns))) <= width:
        return [table]
    keys = list(range(min(keep, len(columns) - 1)))
    blocks: list[list[int]] = [[]]
    for i in range(len(keys), len(columns)):
        if blocks[-1] and _total(table, lows, [*keys, *blocks[-1], i]) > width:
            blocks.append([])
        blocks[-1].append(i)
    out = []
    for n, block in enumerate(blocks):
        chosen = [*keys, *block]
        widths = _allot(table, [lows[i] for i in chosen], [highs[i] for i in chosen],
                        [not columns[i].no_wrap and columns[i].justify != "right"
                         for i in chosen], width)
        part = Table(*[dataclasses.replace(columns[i], _index=j, width=w)
                       for j, (i, w) in enumerate(zip(chosen, widths, strict=True))],
                     title=table.title if n == 0 else None,
                     caption=table.caption if n == len(blocks) - 1 else None,
                     box=table.box, show_header=table.show_header, show_edge=table.show_edge,
                     show_lines=table.show_lines, padding=table.padding,
                     pad_edge=table.pad_edge, collapse_padding=table.collapse_padding,
                     title_justify=table.title_justify, safe_box=table.safe_box,
                     leading=table.leading)
        part.rows = list(table.rows)
        out.append(part)
    return out


def _padding(table: Table, index: int, count: int) -> int:
    _, right, _, left = table.padding
    if table.collapse_padding:
        left, right = 0, abs(left - right)
    if not table.pad_edge:
        left = 0 if index == 0 else left
        right = 0 if index == count - 1 else right
    return left + right


def _total(table: Table, contents: Sequence[int], chosen: Sequence[int] | range) -> int:
    """The printed width of the columns ``chosen`` with these content widths."""
    picked = list(chosen)
    n = len(picked)
    borders = (n - 1 + (2 if table.show_edge else 0)) if table.box else 0
    return sum(contents[i] + _padding(table, j, n) for j, i in enumerate(picked)) + borders


def _allot(table: Table, lows: list[int], highs: list[int], wraps: list[bool],
           width: int) -> list[int]:
    """Content widths: each column's widest, the widest wrapping column narrowed first, never
    below its least."""
    widths = list(highs)
    excess = _total(table, widths, range(len(widths))) - width
    while excess > 0:
        slack = [i for i, w in enumerate(widths) if wraps[i] and w > lows[i]]
        if not slack:
            break
        widest = max(slack, key=lambda i: widths[i])
        widths[widest] -= 1
        excess -= 1
    return widths


MIN_CUT = 16  # a text column of a plain table is cut no narrower than this (or its header)


def plain_table(columns: Sequence[str], rows: Sequence[Sequence[str]], left: set[str],
                keep: int = 1, optional: Sequence[str] = ()) -> str:
    """A fixed-width text table of plain strings (fast: no rich), two spaces between columns.
    When the CLI set a terminal width (pkbsim.report.width) and the table is wider, in order:
    the ``optional`` columns are left out, text columns (in ``left``) are cut to MIN_CUT (their
    cells end in "~"), one space separates columns, and the columns that still do not fit go
    to further tables, each repeating the first ``keep``."""
    widths = [max([len(c), *(len(r[i]) for r in rows)]) for i, c in enumerate(columns)]
    limit = current_width()
    shown = list(range(len(columns)))
    gap = 2

    def total(chosen: Sequence[int]) -> int:
        return sum(widths[j] for j in chosen) + gap * (len(chosen) - 1)

    if limit is not None:
        for name in optional:
            if total(shown) > limit and name in columns:
                shown.remove(columns.index(name))
        while total(shown) > limit:
            text = [i for i in shown if columns[i] in left
                    and widths[i] > max(MIN_CUT, len(columns[i]))]
            if not text:
                break
            widths[max(text, key=lambda i: widths[i])] -= 1
        if total(shown) > limit >= total(shown) - (len(shown) - 1):
            gap = 1
    keys = shown[:min(keep, len(shown) - 1)]
    blocks: list[list[int]] = [[]]
    for i in shown[len(keys):]:
        if limit is not None and blocks[-1] and total([*keys, *blocks[-1], i]) > limit:
            blocks.append([])
        blocks[-1].append(i)

    def line(cells: Sequence[str], chosen: list[int]) -> str:
        return (" " * gap).join(_cut(cells[i], widths[i]).ljust(widths[i]) if columns[i] in left
                                else cells[i].rjust(widths[i]) for i in chosen).rstrip()

    parts = []
    for block in blocks:
        chosen = [*keys, *block]
        rule = (" " * gap).join("-" * widths[i] for i in chosen)
        parts.append("\n".join([line(columns, chosen), rule, *(line(r, chosen) for r in rows)])
                     + "\n")
    return "\n".join(parts)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "~"


def markdown_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A Markdown table's lines; ``|`` and newlines in cells are escaped."""
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return out + ["| " + " | ".join(cell(x) for x in row) + " |" for row in rows]


CSV_DIGITS = 10  # significant digits of a float in CSV: no binary noise (2.4399999999999995)


def csv_value(value: object) -> object:
    """A CSV cell: floats to CSV_DIGITS significant digits, None empty, the rest as they are."""
    if value is None:
        return ""
    if isinstance(value, float) and not isinstance(value, bool):
        return f"{value:.{CSV_DIGITS}g}"
    return value


def json_us(seconds: float) -> float:
    """A time in seconds as microseconds for JSON, rounded to the picosecond."""
    return round(seconds / US, 6)


def json_count(x: float) -> int | float:
    """Bytes and FLOPs: an integer whenever the value is whole."""
    return int(x) if float(x).is_integer() else x
