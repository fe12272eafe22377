"""``--baseline AXIS=VALUE``: each time column as a speed-up over the baseline's row.

For every row and every time column ``X_us``, ``X_speedup`` = the baseline row's ``X_us`` / this
row's ``X_us``, where the baseline row has AXIS = VALUE and the same values on every other axis
(above 1: faster than the baseline). Rows without a baseline row, or with an error (or a point
that does not apply) on either side, get no value.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pkbsim.errors import UsageError
from pkbsim.files import json_text
from pkbsim.planning.axes import parse_values
from pkbsim.planning.sweep import NOT_APPLICABLE, SweepResult


def speedup_columns(columns: list[str]) -> list[str]:
    """``X_speedup`` for each time column ``X_us``, in order."""
    return [c.removesuffix("_us") + "_speedup" for c in columns if c.endswith("_us")]


def parse_baseline(item: str, axis_values: dict[str, tuple[Any, ...]]) -> tuple[str, Any]:
    name, sep, text = item.partition("=")
    name = name.strip()
    if not sep or name not in axis_values:
        raise UsageError(f"--baseline {item!r}: expected AXIS=VALUE with AXIS one of the varied "
                         "axes: " + ", ".join(axis_values))
    values = parse_values(text, f"--baseline {name}")
    if len(values) != 1 or values[0] not in axis_values[name]:
        raise UsageError(f"--baseline {item!r}: the value must be one of the axis's values: "
                         + ", ".join(str(v) for v in axis_values[name]))
    return name, values[0]


def with_speedups(result: SweepResult, axis: str, value: Any) -> SweepResult:
    names = [a.name for a in result.spec.axes]
    others = [n for n in names if n != axis]
    times = [c for c in result.columns if c.endswith("_us")]

    def key(row: dict[str, Any]) -> str:
        return json_text({n: row[n] for n in others}, sort_keys=True)

    base = {key(r): r for r in result.rows if r[axis] == value and "error" not in r
            and NOT_APPLICABLE not in r}
    rows = []
    for row in result.rows:
        ref = base.get(key(row))
        extra: dict[str, Any] = {}
        for col in times:
            mine, theirs = row.get(col), ref.get(col) if ref else None
            if isinstance(mine, (int, float)) and isinstance(theirs, (int, float)) and mine > 0:
                extra[col.removesuffix("_us") + "_speedup"] = theirs / mine
        rows.append({**row, **extra})
    return replace(result, rows=rows, columns=result.columns + speedup_columns(times))


def speedup_summary(result: SweepResult, axis: str, value: Any) -> list[str]:
    """Per speed-up column, over the rows that are not the baseline: median, and how many gain
    at least 1.8x or less than 1.1x."""
    rows = [r for r in result.rows if r[axis] != value]
    lines = []
    for col in (c for c in result.columns if c.endswith("_speedup")):
        got = sorted(float(r[col]) for r in rows if isinstance(r.get(col), int | float))
        if not got:
            continue
        mid = got[len(got) // 2] if len(got) % 2 else (got[len(got) // 2 - 1]
                                                       + got[len(got) // 2]) / 2
        lines.append(f"{col} against {axis}={value}: median {mid:.2f}x over {len(got)} rows "
                     f"({min(got):.2f}x to {max(got):.2f}x); >= 1.8x in "
                     f"{sum(v >= 1.8 for v in got)}, < 1.1x in {sum(v < 1.1 for v in got)}")
    return lines
