"""Figures as bytes: the image formats pkbsim writes and metadata-free, deterministic output."""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pkbsim.errors import UsageError

FORMATS = ("png", "svg", "pdf")
# no dates or versions: the same input, the same file
METADATA: dict[str, dict[str, None]] = {
    "png": {"Software": None}, "svg": {"Date": None, "Creator": None},
    "pdf": {"CreationDate": None, "Creator": None, "Producer": None}}


def check_format(fmt: str) -> None:
    if fmt not in METADATA:
        raise UsageError(f"unknown image format {fmt!r}; expected " + ", ".join(METADATA))


def figure_bytes(fig: Any, fmt: str, dpi: int) -> bytes:
    """``fig`` saved as ``fmt`` (closed afterwards)."""
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format=fmt, dpi=dpi, metadata=METADATA[fmt])
    plt.close(fig)
    return buffer.getvalue()


@contextmanager
def deterministic_figures() -> Iterator[None]:
    """matplotlib's Agg backend, and SVG ids from a fixed salt: the same input, the same bytes."""
    import matplotlib

    matplotlib.use("Agg")
    with matplotlib.rc_context({"svg.hashsalt": "pkbsim"}):
        yield
