"""Units: data types and their element sizes, and formatting of sizes and times.

Inside the model only SI base units exist: bytes, seconds, bytes per second, FLOP per second.
GB/s = 1e9 B/s; KiB/MiB/GiB are powers of two.
"""

from __future__ import annotations

import math

GB = 1e9
US = 1e-6

# Element sizes in bytes. fp8 covers e4m3 and e5m2.
DTYPE_BYTES: dict[str, float] = {
    "fp64": 8, "fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "fp4": 0.5,
    "int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint8": 1, "bool": 1,
    "complex64": 8, "complex128": 16,
}


def format_bytes(n: float) -> str:
    """Human-readable binary size: 2097152 -> '2 MiB', 1000 -> '1000 B'. Below 1 KiB, whole
    bytes: a mean of 13.5 B per rank shows as '14 B', one under half a byte as '<1 B'."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= scale:
            value = n / scale
            return f"{value:.3g} {unit}" if not value.is_integer() else f"{int(value)} {unit}"
    if 0 < abs(n) < 0.5:
        return "<1 B"
    return f"{math.copysign(math.floor(abs(n) + 0.5), n):.0f} B"


def format_us(t_s: float) -> str:
    """Seconds -> a short microsecond string."""
    us = t_s / US
    if us == 0:
        return "0"
    if us >= 100:
        return f"{us:,.0f}"
    if us >= 1:
        return f"{us:.2f}"
    return f"{us:.3g}"
