"""Sweep axes: ``--vary NAME=VALUES`` and ``--sizes`` parsed into lists of values.

VALUES is a comma list (``2,4,8``, ``dgx-h100,gb200-nvl72``) or a range ``START:STOP:STEP``
with STEP ``xF`` (geometric: ``1KiB:1GiB:x2``) or ``+D`` / ``D`` (arithmetic: ``2:16:+2``).
Sizes take the units B, KB, MB, GB (powers of ten) and KiB, MiB, GiB, TiB (powers of two).
``task=all`` is every shipped task, by id.
A range includes STOP when the steps land on it. Numbers stay ints where they are whole.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from pkbsim import bounds
from pkbsim.errors import UsageError
from pkbsim.limits import AXIS_VALUES, SWEEP_POINTS

Value = int | float | str

_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}
_NUMBER = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-z]*)\s*$")


@dataclass(frozen=True)
class Axis:
    name: str
    values: tuple[Value, ...]


def parse_number(text: str, where: str) -> int | float:
    """``4``, ``2.5``, ``1e6``, ``64KiB``, ``1.5GB`` -> a number (bytes for sizes)."""
    m = _NUMBER.match(text)
    if not m or m.group(2).upper() not in _UNITS:
        shown = text if len(text) <= 40 else text[:20] + "..."
        raise UsageError(f"{where}: {shown!r} is not a number or a size (units: B, KB, MB, GB, "
                         "KiB, MiB, GiB, TiB)")
    number = bounds.parse_number(m.group(1), field=where)
    value = bounds.check(float(number) * _UNITS[m.group(2).upper()], "number", field=where)
    return int(value) if value.is_integer() and abs(value) < 2**63 else value


def _range(text: str, where: str) -> list[Value]:
    parts = text.split(":")
    if len(parts) != 3:
        raise UsageError(f"{where}: a range is START:STOP:STEP (e.g. 1KiB:1GiB:x2), got {text!r}")
    start, stop = parse_number(parts[0], where), parse_number(parts[1], where)
    step = parts[2].strip()
    out: list[Value] = []
    if step.lower().startswith("x"):
        factor = parse_number(step[1:], where)
        if factor <= 1 or start <= 0:
            raise UsageError(f"{where}: a geometric range needs START > 0 and a factor above 1, "
                             f"got {text!r}")
        if stop >= start:
            AXIS_VALUES.check(math.log(stop / start) / math.log(factor) + 1, f"{where} {text}")
        value: float = start
        while value <= stop * (1 + 1e-12):
            out.append(int(value) if float(value).is_integer() else value)
            value *= factor
    else:
        delta = parse_number(step.removeprefix("+"), where)
        if delta <= 0:
            raise UsageError(f"{where}: the step of {text!r} must be above 0")
        count = int((stop - start) / delta + 1e-9) + 1
        if count < 1:
            raise UsageError(f"{where}: {text!r} is empty (STOP below START)")
        AXIS_VALUES.check(count, f"{where} {text}")
        for i in range(count):
            value = start + i * delta
            out.append(int(value) if float(value).is_integer() else value)
    if not out:
        raise UsageError(f"{where}: {text!r} is empty (STOP below START)")
    return out


def parse_values(text: str, where: str, numeric: bool = False) -> list[Value]:
    """A comma list or a range; items that look like numbers become numbers."""
    if not text.strip():
        raise UsageError(f"{where}: no values")
    if ":" in text and "," not in text:
        return _range(text, where)
    out: list[Value] = []
    AXIS_VALUES.check(text.count(",") + 1, where)
    for item in (s.strip() for s in text.split(",")):
        if not item:
            raise UsageError(f"{where}: empty item in {text!r}")
        m = _NUMBER.match(item)
        if m and m.group(2).upper() in _UNITS:
            out.append(parse_number(item, where))
        elif numeric:
            raise UsageError(f"{where}: {item!r} is not a number")
        else:
            out.append(item)
    return out


def parse_sizes(text: str, where: str) -> list[Value]:
    """A collective's sizes: bytes per rank, each at least 1 (``size`` in docs/limits.md)."""
    values = parse_values(text, where, numeric=True)
    for value in values:
        bounds.check(value, "size", field=where)
    return values


def parse_vary(item: str) -> Axis:
    """``NAME=VALUES`` -> an Axis."""
    name, sep, values = item.partition("=")
    name = name.strip()
    if not sep or not name:
        raise UsageError(f"--vary {item!r}: expected NAME=VALUES (e.g. world_size=2,4,8)")
    numeric = name in ("world_size", "size", "chunks", "sms")
    if name == "task" and values.strip() == "all":
        from pkbsim.task.loader import list_tasks

        return Axis(name, tuple(int(p.stem.split("_", 1)[0]) for p in list_tasks()))
    where = f"--vary {name}"
    axis = Axis(name, tuple(parse_sizes(values, where) if name == "size"
                            else parse_values(values, where, numeric)))
    if name == "world_size" and any(not isinstance(v, int) or v < 1 for v in axis.values):
        raise UsageError(f"--vary world_size: expected whole numbers >= 1, got {values!r}")
    return axis


def check_axes(axes: Sequence[Axis]) -> None:
    names = [a.name for a in axes]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise UsageError(f"--vary {sorted(dup)[0]}: given twice")
    total = 1
    for a in axes:
        total *= len(a.values)
    SWEEP_POINTS.check(total, "the sweep's points")


def expand(axes: Sequence[Axis]) -> Iterator[dict[str, Value]]:
    """Every combination, the last axis fastest (as nested loops in the given order)."""
    check_axes(axes)
    for combo in itertools.product(*(a.values for a in axes)):
        yield dict(zip((a.name for a in axes), combo, strict=True))
