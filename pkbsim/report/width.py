"""The width tables fit: the terminal's, set by the CLI for the command it runs, else each
renderer's own (output to a file or a pipe stays the same on every machine). Light: no rich."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

MIN_WIDTH = 40  # narrower terminals are treated as this wide
_width: ContextVar[int | None] = ContextVar("pkbsim_output_width", default=None)


@contextlib.contextmanager
def output_width(width: int | None) -> Iterator[None]:
    """Within this block tables fit ``width`` columns; None keeps each renderer's width."""
    token = _width.set(None if width is None else max(MIN_WIDTH, width))
    try:
        yield
    finally:
        _width.reset(token)


def current_width() -> int | None:
    """The width set by :func:`output_width`, or None."""
    return _width.get()


def width_for(default: int) -> int:
    """The width set by :func:`output_width`, else ``default``."""
    width = _width.get()
    return default if width is None else width
