"""Text helpers every renderer shares: rich objects to a string, Markdown tables, JSON numbers."""

from __future__ import annotations

import io
from collections.abc import Sequence

from rich.console import Console

from pkbsim.units import US

WIDTH = 132


def to_text(*renderables: object, width: int = WIDTH) -> str:
    """Render rich objects to a string (the CLI decides where it goes). Text is shown as it is:
    no markup, emoji codes or highlighting, since cells hold file names, error messages and
    candidates' output ("[/x]" must print, not fail)."""
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, force_terminal=False, color_system=None,
                      soft_wrap=False, markup=False, emoji=False, highlight=False)
    for item in renderables:
        console.print(item)
    return buffer.getvalue()


def markdown_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A Markdown table's lines; ``|`` and newlines in cells are escaped."""
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return out + ["| " + " | ".join(cell(x) for x in row) + " |" for row in rows]


def json_us(seconds: float) -> float:
    """A time in seconds as microseconds for JSON, rounded to the picosecond."""
    return round(seconds / US, 6)


def json_count(x: float) -> int | float:
    """Bytes and FLOPs: an integer whenever the value is whole."""
    return int(x) if float(x).is_integer() else x
