"""Every number that enters pkbsim is checked here: finite, inside its quantity's documented
range, and a whole number where a count is meant.

Numbers arrive from command-line options, ``--set`` and ``--override`` values, sweep axes, data
files (topologies, tasks, strategies), results files and logs. Each is checked against a
:class:`Quantity`; a bad one is one error naming the source, the field, the value and the range
(``docs/limits.md`` lists every range). Text is parsed by :func:`parse_number`, which refuses
NaN, infinities, overflow and digit strings too long to be a number pkbsim could use before
converting them.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from pkbsim.errors import InfeasibleError, PkbsimError, UsageError

MAX_NUMBER_CHARS = 40  # longer text is not a number any range here admits
_NUMBER = re.compile(r"[+-]?(\d+(_?\d+)*(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


@dataclass(frozen=True)
class Quantity:
    """A kind of number and the values it may take."""

    name: str
    lo: float
    hi: float
    integer: bool = False
    lo_open: bool = False  # lo itself excluded
    what: str = ""
    least: float = 0.0  # with lo 0: the smallest value above 0 (1e-320 GB/s is no bandwidth)

    def describe(self) -> str:
        kind = "an integer" if self.integer else "a number"
        top = f"<= {_fmt(self.hi)}"
        if self.least > 0 and self.lo == 0:
            low = f"{kind} >= {_fmt(self.least)} and {top}"
            return low if self.lo_open else f"0 or {low}"
        return f"{kind} {'>' if self.lo_open else '>='} {_fmt(self.lo)} and {top}"

    def admits(self, value: float) -> bool:
        if not math.isfinite(value):
            return False
        if self.integer and value != int(value):
            return False
        if value != 0 and abs(value) < self.least:
            return False
        above = value > self.lo if self.lo_open else value >= self.lo
        return above and value <= self.hi


def _fmt(x: float) -> str:
    if x == int(x) and abs(x) < 1e13:
        return f"{int(x):,}"
    if x == int(x) and x != 0 and math.log2(abs(x)) == int(math.log2(abs(x))):
        return f"{'-' if x < 0 else ''}2^{int(math.log2(abs(x)))}"
    return f"{x:g}"


EiB = 2**60
MAX_RESULT_US = 1e12  # a computed time past this comes from a rate or a size out of proportion
# The ranges, by quantity. Data-file fields take theirs from the unit in their name
# (``range_for``); options and task quantities name theirs.
QUANTITIES: dict[str, Quantity] = {q.name: q for q in (
    Quantity("world_size", 1, 2**20, integer=True, what="ranks"),
    Quantity("count", 0, 10**6, integer=True, what="GPUs, links, NICs, SMs, engines, ..."),
    Quantity("repeat", 0, 10**7, integer=True, what="an op's calls per iteration"),
    Quantity("launches", 0, 10**7, integer=True, what="kernels an op launches"),
    Quantity("host_syncs", 0, 10**6, integer=True, what="host synchronisations of an op"),
    Quantity("root", 0, 2**20 - 1, integer=True, what="a rank"),
    Quantity("imbalance", 1, 10**6, what="largest rank over the mean"),
    Quantity("bytes", 0, EiB, what="bytes (per rank, per op, per message)", least=1),
    Quantity("size", 1, EiB, what="a collective's bytes per rank (--sizes, size=)"),
    Quantity("flops", 0, 1e21, what="floating-point operations"),
    Quantity("parameter", -EiB, EiB, what="a task parameter or derived value"),
    Quantity("GBps", 0, 1e6, what="bandwidth, GB/s (0: none)", least=1e-3),
    Quantity("measured_GBps", 0, 1e6, least=1e-15,
             what="a measured bandwidth, GB/s (down to 1 byte in the longest measured time)"),
    Quantity("us", 0, 1e9, what="a time, microseconds"),
    Quantity("seconds", 0, 1e7, lo_open=True, what="a time limit, seconds"),
    Quantity("GB", 0, 1e7, what="a capacity, GB or MiB"),
    Quantity("tflops", 0, 1e7, lo_open=True, what="peak TFLOP/s", least=1e-3),
    Quantity("fraction", 0, 1, lo_open=True, what="an efficiency or a fraction of line rate",
             least=1e-3),
    Quantity("measured_us", 0, 1e12, lo_open=True, what="a measured time, microseconds",
             least=1e-3),
    Quantity("result_us", 0, MAX_RESULT_US,
             what="a computed time: a bound or a prediction, microseconds (about 11.6 days)"),
    Quantity("iterations", 1, 1000, integer=True, what="back-to-back iterations simulated"),
    Quantity("chunks", 1, 1024, integer=True, what="pieces one call is cut into"),
    Quantity("sms", 0, 10**5, integer=True, what="SMs given to communication"),
    Quantity("jobs", 1, 4096, integer=True, what="worker processes"),
    Quantity("gpus", 1, 10**5, integer=True, what="GPUs to use"),
    Quantity("nodes", 1, 10**5, integer=True, what="machines"),
    Quantity("whole", 1, EiB, integer=True, what="a positive whole number (a size bound)"),
    Quantity("schema_version", 1, 1000, integer=True, what="a file's schema version"),
    Quantity("number", -1e18, 1e18, what="any other number"),
)}

# unit suffix ("_GBps": any name ending so) or whole name of a data-file field -> its quantity
_BY_NAME = (
    ("_GBps", "GBps"), ("_us", "us"), ("_GB", "GB"), ("_MiB", "GB"), ("_bytes", "bytes"),
    ("_efficiency", "fraction"), ("efficiency", "fraction"), ("_s", "seconds"),
    ("_tflops", "tflops"),
    ("schema_version", "schema_version"), ("world_size", "world_size"), ("repeat", "repeat"),
    ("launches", "launches"), ("host_syncs", "host_syncs"), ("imbalance", "imbalance"),
    ("chunks", "chunks"), ("sms", "sms"), ("flops", "flops"), ("root", "root"),
)


def range_for(field: str, integer: bool = False) -> Quantity:
    """The quantity of a data-file field: by the unit its name (or, failing that, its
    section's, e.g. ``peak_tflops.bf16_tensor``) ends in; a count or a number otherwise."""
    for part in reversed(field.split(".")):
        part = part.split("[", 1)[0]
        for suffix, name in _BY_NAME:
            if part.endswith(suffix) if suffix.startswith("_") else part == suffix:
                return QUANTITIES[name]
    return QUANTITIES["count" if integer else "number"]


def check(value: object, quantity: str | Quantity, *, source: str | None = None,
          field: str | None = None, error: type[PkbsimError] = UsageError) -> float:
    """``value`` if it is a number ``quantity`` admits (ints stay ints); else one error that
    names the source, the field, the value and the range."""
    q = QUANTITIES[quantity] if isinstance(quantity, str) else quantity
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise error(f"expected {q.describe()}, got {show(value)}", file=source, field=field)
    try:
        ok = q.admits(float(value))
    except OverflowError:  # an int beyond float's range
        ok = False
    if not ok:
        raise error(f"expected {q.describe()}, got {show(value)}", file=source, field=field)
    return value if isinstance(value, int) else float(value)


def check_result(seconds: float, what: str) -> float:
    """A computed time (``what``: the bound or prediction it is), if finite and within
    ``result_us``; else an InfeasibleError rather than a figure no machine would take."""
    us = seconds * 1e6
    if not QUANTITIES["result_us"].admits(us):
        shown = f"{us:.3g} us" if math.isfinite(us) else "not finite"
        raise InfeasibleError(f"{what} is {shown}, beyond the {MAX_RESULT_US:g} us pkbsim "
                              "reports: a bandwidth, rate or size far out of proportion?")
    return seconds


def check_option(value: object, quantity: str | Quantity, option: str) -> float:
    """As :func:`check`, for a command-line option: ``OPTION VALUE: expected RANGE``."""
    q = QUANTITIES[quantity] if isinstance(quantity, str) else quantity
    try:
        return check(value, q)
    except UsageError:
        raise UsageError(f"{option} {show(value)}: expected {q.describe()}") from None


def check_int(value: object, quantity: str | Quantity, *, source: str | None = None,
              field: str | None = None, error: type[PkbsimError] = UsageError) -> int:
    """As :func:`check`, for a count: the value as an int."""
    return int(check(value, quantity, source=source, field=field, error=error))


def parse_number(text: str, *, source: str | None = None, field: str | None = None,
                 error: type[PkbsimError] = UsageError) -> int | float:
    """A finite number from text (an int where the text is one): no NaN, no infinity, no
    overflow, at most MAX_NUMBER_CHARS characters."""
    s = text.strip()
    if len(s) > MAX_NUMBER_CHARS:
        raise error(f"expected a number of at most {MAX_NUMBER_CHARS} characters, got "
                    f"{show(s)}", file=source, field=field)
    if not _NUMBER.fullmatch(s):
        raise error(f"expected a number, got {show(s)}", file=source, field=field)
    if re.fullmatch(r"[+-]?\d+(_?\d+)*", s):
        return int(s)
    value = float(s)
    if not math.isfinite(value):
        raise error(f"expected a finite number, got {show(s)}", file=source, field=field)
    return value


def show(value: object) -> str:
    """A value for an error message: short, and never a 5,000-digit repr."""
    if isinstance(value, int) and value.bit_length() > 128:  # repr would be long, or refused
        return f"an integer of {int(value.bit_length() * math.log10(2)) + 1} digits"
    text = repr(value)
    return text if len(text) <= 42 else text[:20] + "..." + text[-8:] + f" ({len(text)} chars)"
