"""Measured times of a problem's reference and candidate kernels: PKB logs, a CSV, or one value.

**PKB's logs** (ParallelKernelBench at commit 3cc0f9b, 2026-06-24; read, not copied).
``run_local.py --measure-perf --download`` runs ``scripts/worker.py`` under torchrun; every rank
times the solution with ``utils/performance.py: measure_solution_performance`` (500 warm-up
iterations, 100 timed ones, back to back with one CUDA event after each, inputs cycled over
L2-sized groups) and writes ``rank_<rank>_perf.json``, a JSON object with the fields
``wall_time_ms`` (mean time per iteration: the events' total over ``iterations``),
``wall_time_total_ms``, ``wall_time_std_ms``, ``min_time_ms``, ``max_time_ms``,
``iterations``, ``warmup_iterations``, ``num_input_groups``, ``l2_cache_size_bytes`` and
``timed_tensor_bytes``. ``--download`` copies them to

    logs/problem_<stem>/<backend>/rank_<r>_perf.json               (--mode dryrun)
    logs/problem_<stem>/<backend>/trial_<t>/rank_<r>_perf.json     (--mode eval, one per trial)

with ``<stem>`` the problem file's stem (``1_allreduce``, pkbsim's task key too) and
``<backend>`` ``reference`` or the solution's backend (``cuda``, ``triton``,
``parallelkittens``, ...). Other files there (``rank_<r>.pt`` outputs, ``traces/``) are
ignored. PKB aggregates ranks by the slowest: ``wall_time_ms`` max over ranks
(``utils/run_utils.py: summarize_perf_artifacts``, ``utils/compare_performance.py``).

Here, per problem and variant (the backend directory's name): each trial's time is the slowest
rank's ``wall_time_ms``; the variant's ``time_us`` is the median over trials (one trial: its
time). Every rank from 0 to the highest present must have its file, so a crashed rank is an
error rather than a silently faster time.

**CSV**: a header naming ``problem``, ``variant`` and ``time_us`` (microseconds), optionally
``rank``; ``problem`` is a task id, name, ``id_name`` key or alias. With ``rank``, the rows of
one (problem, variant) are its ranks and the slowest is the time; without it, one row each.

**One value** (``--measured-us``): :func:`from_value`.

Every malformed input raises :class:`MeasurementError` naming the file and the field or line.
"""

from __future__ import annotations

import csv
import math
import re
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pkbsim.bounds import check, parse_number
from pkbsim.errors import PkbsimError
from pkbsim.inputs import loads_json, path_kind, read_bytes, read_text
from pkbsim.limits import RANK_FILE_BYTES
from pkbsim.task.loader import find_task

REFERENCE = "reference"
PERF_FIELD = "wall_time_ms"
CSV_COLUMNS = ("problem", "variant", "time_us")
CSV_OPTIONAL = ("rank",)
_RANK_FILE = re.compile(r"^rank_(\d{1,7})_perf\.json$")  # at most 7 digits: a rank
_TRIAL_DIR = re.compile(r"^trial_(\d{1,7})$")
_PROBLEM_PREFIX = "problem_"


class MeasurementError(PkbsimError):
    """A measured-time input (PKB logs, CSV, a value) is missing or malformed."""


@dataclass(frozen=True)
class Trial:
    """One timed run: each rank's mean time per iteration."""

    per_rank_us: tuple[float, ...]  # index = rank
    source: str  # the directory (logs) or file (CSV) it came from
    ranked: bool = True  # False: one time given without ranks (CSV without rank, a value)

    @property
    def time_us(self) -> float:
        """The slowest rank (PKB's convention)."""
        return max(self.per_rank_us)


@dataclass(frozen=True)
class Measurement:
    problem: str  # pkbsim's task key, ``<id>_<name>``
    variant: str  # ``reference`` or the candidate's backend / label
    trials: tuple[Trial, ...]

    @property
    def time_us(self) -> float:
        """Median over trials of each trial's slowest rank."""
        return statistics.median(t.time_us for t in self.trials)

    @property
    def time_s(self) -> float:
        return self.time_us * 1e-6

    @property
    def world_size(self) -> int | None:
        """Ranks measured; None when the input gave times without ranks."""
        counts = {len(t.per_rank_us) for t in self.trials}
        ranked = all(t.ranked for t in self.trials)
        return counts.pop() if ranked and len(counts) == 1 else None

    @property
    def is_reference(self) -> bool:
        return self.variant == REFERENCE


@dataclass(frozen=True)
class MeasuredSet:
    """Measurements by (problem, variant), in input order."""

    items: tuple[Measurement, ...]
    source: str

    def get(self, problem: str, variant: str) -> Measurement | None:
        key = _task_key(problem, self.source, "problem")
        return next((m for m in self.items if (m.problem, m.variant) == (key, variant)), None)

    def problems(self) -> list[str]:
        return list(dict.fromkeys(m.problem for m in self.items))

    def for_problem(self, problem: str) -> list[Measurement]:
        key = _task_key(problem, self.source, "problem")
        return [m for m in self.items if m.problem == key]

    def reference(self, problem: str) -> Measurement | None:
        return self.get(problem, REFERENCE)

    def candidates(self, problem: str) -> list[Measurement]:
        return [m for m in self.for_problem(problem) if not m.is_reference]


# ---------------------------------------------------------------- entry points

def load_measured(path: str | Path) -> MeasuredSet:
    """A PKB logs directory (``logs/`` or one ``logs/problem_<stem>/``) or a CSV file."""
    p = Path(path).expanduser()
    kind = path_kind(p, error=MeasurementError, name=str(path))
    if kind == "folder":
        return read_pkb_logs(p)
    if kind == "file":
        return read_measured_csv(p)
    if kind == "other":
        raise MeasurementError("not a regular file or a folder (a FIFO, device or socket is "
                               "not read; expected a CSV file or a PKB logs folder)",
                               file=str(path))
    raise MeasurementError("no such file or directory", file=str(path))


def from_value(time_us: float, problem: str, variant: str = "candidate",
               source: str = "--measured-us") -> Measurement:
    """One measured time (``--measured-us``) for ``problem``."""
    value = _positive(time_us, source, "")
    key = _task_key(problem, source, "problem")
    return Measurement(key, variant, (Trial((value,), source, ranked=False),))


def read_pkb_logs(logs_dir: str | Path) -> MeasuredSet:
    """Every ``problem_<stem>/<backend>/[trial_<t>/]rank_<r>_perf.json`` under ``logs_dir``."""
    root = Path(logs_dir).expanduser()
    if not root.is_dir():
        raise MeasurementError("not a directory", file=str(root))
    problem_dirs = ([root] if root.name.startswith(_PROBLEM_PREFIX) else
                    sorted((d for d in root.iterdir()
                            if d.is_dir() and d.name.startswith(_PROBLEM_PREFIX)),
                           key=_natural))
    items: list[Measurement] = []
    for pdir in problem_dirs:
        key = _task_key(pdir.name[len(_PROBLEM_PREFIX):], str(pdir), "problem directory")
        for bdir in sorted((d for d in pdir.iterdir() if d.is_dir()), key=_natural):
            trials = _backend_trials(bdir)
            if trials:
                items.append(Measurement(key, bdir.name, tuple(trials)))
    if not items:
        raise MeasurementError("no rank_<r>_perf.json found (expected problem_<stem>/<backend>/"
                               "[trial_<t>/]rank_<r>_perf.json, as PKB's run_local.py "
                               "--measure-perf --download writes)", file=str(root))
    return MeasuredSet(tuple(items), str(root))


def read_measured_csv(path: str | Path) -> MeasuredSet:
    """Rows of ``problem,variant,time_us[,rank]`` (header required)."""
    file = str(path)
    text = read_text(path, error=MeasurementError, strict=True)
    try:
        rows = list(csv.reader(text.splitlines()))
    except csv.Error as exc:  # e.g. a field larger than the csv module's limit
        raise MeasurementError(f"not a CSV file: {exc}", file=file) from None
    header = [h.strip() for h in rows[0]] if rows else []
    _check_header(header, file)
    ranked = "rank" in header
    times: dict[tuple[str, str], dict[int, float]] = {}
    seen: dict[tuple[str, str, int], int] = {}
    for line_no, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            raise MeasurementError(f"expected {len(header)} columns ({','.join(header)}), got "
                                   f"{len(row)}", file=file, field=f"line {line_no}")
        cells = dict(zip(header, (c.strip() for c in row), strict=True))
        where = f"line {line_no}"
        key = _task_key(cells["problem"], file, f"{where}: problem")
        variant = cells["variant"]
        if not variant:
            raise MeasurementError("empty variant", file=file, field=f"{where}: variant")
        rank = _rank(cells["rank"], file, where) if ranked else 0
        value = _positive(_number(cells["time_us"], file, f"{where}: time_us"), file,
                          f"{where}: time_us")
        first = seen.setdefault((key, variant, rank), line_no)
        if first != line_no:
            what = f"{key}, {variant}" + (f", rank {rank}" if ranked else "")
            raise MeasurementError(f"duplicate row for ({what}); first on line {first}",
                                   file=file, field=where)
        times.setdefault((key, variant), {})[rank] = value
    if not times:
        raise MeasurementError("no data rows after the header", file=file)
    items = []
    for (key, variant), per_rank in times.items():
        ranks = _contiguous(per_rank, file, f"{key}, {variant}: rank")
        items.append(Measurement(key, variant, (Trial(ranks, file, ranked),)))
    return MeasuredSet(tuple(items), file)


# ---------------------------------------------------------------- PKB logs

def _backend_trials(bdir: Path) -> list[Trial]:
    """The flat ranks (dryrun) and each ``trial_<t>/`` (eval), in trial order."""
    trials: list[Trial] = []
    flat = _rank_files(bdir)
    if flat:
        trials.append(_trial(bdir, flat))
    subdirs = sorted((d for d in bdir.iterdir() if d.is_dir() and _TRIAL_DIR.match(d.name)),
                     key=lambda d: int(d.name.split("_")[1]))
    for tdir in subdirs:
        files = _rank_files(tdir)
        if files:
            trials.append(_trial(tdir, files))
    return trials


def _rank_files(folder: Path) -> dict[int, Path]:
    out: dict[int, Path] = {}
    for f in folder.iterdir():
        if not f.is_file() or not f.name.startswith("rank_") or not f.name.endswith(
                "_perf.json"):
            continue
        match = _RANK_FILE.match(f.name)
        if not match:
            raise MeasurementError("expected a file name rank_<integer>_perf.json", file=str(f))
        out[int(match.group(1))] = f
    return out


def _trial(folder: Path, files: Mapping[int, Path]) -> Trial:
    times = {rank: _rank_time(path) for rank, path in files.items()}
    return Trial(_contiguous(times, str(folder), "rank_<r>_perf.json"), str(folder))


def _rank_time(path: Path) -> float:
    file = str(path)
    data = loads_json(read_bytes(path, limit=RANK_FILE_BYTES, error=MeasurementError),
                      file=file, error=MeasurementError)
    if not isinstance(data, dict):
        raise MeasurementError("expected a JSON object", file=file)
    if PERF_FIELD not in data:
        raise MeasurementError("missing (PKB's mean time per iteration, ms)", file=file,
                               field=PERF_FIELD)
    value = data[PERF_FIELD]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise MeasurementError(f"expected a number, got {value!r}", file=file, field=PERF_FIELD)
    return _positive(float(value), file, PERF_FIELD) * 1000.0  # ms -> us


# ---------------------------------------------------------------- checks

def _task_key(name: str, file: str, field: str) -> str:
    """pkbsim's ``<id>_<name>`` key of a task id, name, key or alias."""
    if not name:
        raise MeasurementError("empty problem", file=file, field=field)
    try:
        return find_task(name).stem
    except PkbsimError as exc:
        raise MeasurementError(f"{name!r}: {exc.message}", file=file, field=field) from None


def _check_header(header: list[str], file: str) -> None:
    missing = [c for c in CSV_COLUMNS if c not in header]
    if missing:
        raise MeasurementError(f"header must name {', '.join(CSV_COLUMNS)} (optional: rank); "
                               f"missing {', '.join(missing)}", file=file, field="line 1")
    unknown = [c for c in header if c not in CSV_COLUMNS + CSV_OPTIONAL]
    if unknown or len(set(header)) != len(header):
        what = f"unknown column {unknown[0]!r}" if unknown else "a column named twice"
        raise MeasurementError(f"{what}; expected {', '.join(CSV_COLUMNS)} and optionally "
                               "rank", file=file, field="line 1")


def _number(text: str, file: str, field: str) -> float:
    if text.strip().lower().lstrip("+-") in ("nan", "inf", "infinity"):
        return float(text)  # _positive names it
    return float(parse_number(text, source=file, field=field, error=MeasurementError))


def _positive(value: float, file: str, field: str) -> float:
    if not (math.isfinite(value) and value > 0):
        raise MeasurementError(f"must be a positive time, got {value:g}", file=file,
                               field=field or None)
    return check(value, "measured_us", source=file, field=field or None,
                 error=MeasurementError)


def _rank(text: str, file: str, where: str) -> int:
    if not text.isdigit() or len(text) > 7:
        raise MeasurementError(f"expected a rank 0, 1, ..., got {text[:20]!r}", file=file,
                               field=f"{where}: rank")
    return int(text)


def _contiguous(per_rank: Mapping[int, float], file: str, field: str) -> tuple[float, ...]:
    """Times of ranks 0..n-1; a gap means a rank did not report (crashed or missing)."""
    missing = [r for r in range(max(per_rank) + 1) if r not in per_rank]
    if missing:
        raise MeasurementError(f"ranks 0..{max(per_rank)} expected, missing "
                               f"{', '.join(map(str, missing))}", file=file, field=field)
    return tuple(per_rank[r] for r in range(len(per_rank)))


def _natural(path: Path) -> tuple[int, str]:
    """``problem_2_x`` before ``problem_10_y``."""
    head = path.name.removeprefix(_PROBLEM_PREFIX).split("_", 1)[0]
    return (int(head) if head.isdigit() and len(head) <= 9 else 10**9, path.name)

