"""The sweep engine: every point of a spec evaluated, in parallel, streamed to a JSON-lines file.

The file's first line is a header describing the spec; each further line is one finished point
(its axis values, then ``error`` or the metric columns), appended and flushed as it finishes, so
a sweep that is interrupted keeps what it finished and a second run with the same spec resumes.
Nothing here prints; ``progress`` is the caller's hook.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

from pkbsim.errors import NotApplicableError, PkbsimError, UsageError
from pkbsim.files import json_text, open_stream, write_atomic
from pkbsim.guard import die_with_parent
from pkbsim.inputs import loads_json, read_bytes
from pkbsim.limits import SIM_MEMORY
from pkbsim.planning.axes import Axis, Value, expand
from pkbsim.planning.evaluate import Target, columns, evaluate

HEADER_KEY = "pkbsim_sweep"
NOT_APPLICABLE = "not_applicable"  # a row's reason when its point does not apply
STOP_GRACE_S = 2.0  # a stopped worker has this long to exit on SIGTERM before SIGKILL
HEADER_VERSION = 1
CHUNK_S = 0.05  # a chunk of cheap points takes about this long; costly points go one by one
MAX_CHUNK_POINTS = 64

Row = dict[str, Any]
Progress = Callable[[int, int], None]
Record = Callable[[int, Row], None]  # a finished row (by point index) to the file and progress
Items = list[tuple[int, dict[str, Value]]]  # pending points with their indices


@dataclass(frozen=True)
class SweepSpec:
    """What a sweep evaluates: a target, its axes (last fastest) and the metrics."""

    target: Target
    axes: tuple[Axis, ...]
    metrics: tuple[str, ...]

    @property
    def axis_names(self) -> list[str]:
        return [a.name for a in self.axes]

    def header(self) -> dict[str, Any]:
        """The first line of the results file; a resumed file must carry the same one."""
        t = self.target
        return {HEADER_KEY: HEADER_VERSION,
                "target": {"task": t.task, "collective": t.collective, "topology": t.topology,
                           "preset": t.preset, "host_model": t.host},
                "axes": [{"name": a.name, "values": list(a.values)} for a in self.axes],
                "metrics": list(self.metrics)}


@dataclass(frozen=True)
class SweepCounts:
    ok: int
    failed: int
    resumed: int  # rows read back from an earlier run's file
    computed: int  # rows evaluated by this run
    not_applicable: int = 0  # points that do not apply (a preset the task lacks): not failures


@dataclass(frozen=True)
class SweepResult:
    spec: SweepSpec
    rows: list[Row]  # in point order: the point's axis values, then error or the columns
    columns: list[str]  # the metric columns, units in the names
    counts: SweepCounts


def points(spec: SweepSpec) -> Iterator[dict[str, Value]]:
    return expand(spec.axes)


def point_key(point: Mapping[str, Any], names: Sequence[str]) -> str:
    """A stable key of a point (its axis values), equal for a point and its row read back."""
    return json_text({n: point[n] for n in names}, sort_keys=True)


def evaluate_chunk(target: Target, metrics: tuple[str, ...], chunk: Items
                   ) -> list[tuple[int, Row]]:
    """Worker side: the rows of a few points (top level, so a pool or a cluster can pickle it
    by name)."""
    return [(i, evaluate_row(target, p, metrics)) for i, p in chunk]


def evaluate_row(target: Target, point: Mapping[str, Value], metrics: Sequence[str],
                 strict: bool = False) -> Row:
    """A point's row; a bad point gives an ``error`` row (``strict``: a UsageError raises), a
    point that does not apply (a preset its task lacks) a ``not_applicable`` row."""
    try:
        return {**point, **evaluate(target, point, metrics)}
    except NotApplicableError as exc:
        return {**point, NOT_APPLICABLE: exc.one_line()}
    except PkbsimError as exc:
        if strict and isinstance(exc, UsageError):
            raise
        return {**point, "error": exc.one_line()}


def _ignore_sigint() -> None:
    """Workers leave Ctrl-C to the parent, which stops them (no tracebacks from children), and
    die on SIGTERM: a forked worker inherits the CLI's SIGTERM-as-Ctrl-C handler, and a worker
    that turned SIGTERM into an exception would report it and take the next task. They die
    with the parent, however it ends."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    die_with_parent()  # a SIGKILLed parent must not leave its workers running


def read_results(path: Path, spec: SweepSpec) -> tuple[dict[str, Row], int]:
    """Rows of an earlier run of the same spec, and the byte length of the file's valid part.

    Only a file this sweep wrote is resumed: its first line is the spec's header, each further
    line one of its rows (the point's axis values, then ``error`` or the metric columns, each
    of its type). A last line without its newline that does not parse (cut off by a kill) is
    dropped; any other bad line is an error naming the line. A missing or empty file, or one
    holding only the start of this spec's header (a kill while it was written), gives no rows
    and length 0; any other file that is not this sweep is refused, whatever its length.
    """
    if not path.exists():
        return {}, 0
    data = read_bytes(path)
    header = json_text(spec.header()).encode()
    if not data or (b"\n" not in data and header.startswith(data)):
        return {}, 0
    lines = data.split(b"\n")
    last = max((i for i, raw in enumerate(lines) if raw.strip()), default=-1)
    if last < 0:  # blank lines only
        _check_header(None, spec, path)
    cut_off = not data.endswith(b"\n")  # a kill mid-line leaves a last line without newline
    names = spec.axis_names
    keys = {point_key(p, names) for p in points(spec)}
    schema = _row_schema(spec)
    rows: dict[str, Row] = {}
    offset = valid_end = 0
    for i, raw in enumerate(lines[:last + 1]):
        offset += len(raw) + 1
        try:
            record = loads_json(raw) if raw.strip() else None
        except UsageError as exc:
            if i == last and i > 0 and cut_off:
                break
            if i == 0:
                _check_header(None, spec, path)
            what = exc.message.split(" (", 1)[0]
            raise UsageError(f"line {i + 1}: {what} (fix or delete it, or pass --fresh)",
                             file=str(path)) from None
        if i == 0:
            _check_header(record, spec, path)
        elif record is not None:
            key = _check_row(record, names, keys, schema, path, i + 1)
            if key in rows:
                raise UsageError(f"line {i + 1}: {key} is a second row of one point (fix or "
                                 "delete it, or pass --fresh)", file=str(path))
            rows[key] = record
        valid_end = min(offset, len(data))
    return rows, valid_end


def _check_header(record: Any, spec: SweepSpec, path: Path) -> None:
    if not isinstance(record, dict) or HEADER_KEY not in record:
        raise UsageError("line 1: not a pkbsim sweep results file; pass another path or --fresh "
                         "to overwrite it", file=str(path))
    if record != json.loads(json_text(spec.header())):
        raise UsageError("holds a different sweep (target, axes or metrics differ); pass "
                         "another path, or --fresh to start over", file=str(path))


def _row_schema(spec: SweepSpec) -> dict[str, tuple[type, ...]]:
    """The metric columns of a row and the types each may hold (``None``: a ratio that has no
    value, such as attainment at a zero time)."""
    schema: dict[str, tuple[type, ...]] = {}
    for col in columns(spec.metrics, spec.target):
        if col == "binding":
            schema[col] = (str,)
        elif col.endswith("_attainment") or col == "line_rate_busbw_GBps":
            schema[col] = (int, float, type(None))
        else:
            schema[col] = (int, float)
    return schema


def _check_row(record: Any, names: Sequence[str], keys: set[str],
               schema: Mapping[str, tuple[type, ...]], path: Path, number: int) -> str:
    """A row's point key, after checking it is a row this sweep writes: its point's axis
    values, then ``error`` or ``not_applicable`` (text) or every metric column with a value of
    its type."""
    if not isinstance(record, dict) or any(n not in record for n in names):
        raise UsageError(f"line {number}: not a row of this sweep (axes "
                         + ", ".join(names) + ")", file=str(path))
    key = point_key(record, names)
    if key not in keys:
        raise UsageError(f"line {number}: {key} is not a point of this sweep", file=str(path))
    fields = {k: v for k, v in record.items() if k not in names}
    expected = ({"error": (str,)} if "error" in fields
                else {"not_applicable": (str,)} if "not_applicable" in fields else schema)
    problem = _field_problem(fields, expected)
    if problem:
        raise UsageError(f"line {number}: {problem}, not a row this sweep wrote (fix or delete "
                         "it, or pass --fresh)", file=str(path))
    return key


def _field_problem(fields: Mapping[str, Any], expected: Mapping[str, tuple[type, ...]]) -> str:
    """What is wrong with a row's fields, or the empty string."""
    for name in fields:
        if name not in expected:
            return f"unexpected field {name!r}"
    for name, types in expected.items():
        if name not in fields:
            return f"no {name!r}"
        value = fields[name]
        if isinstance(value, bool) or not isinstance(value, types):
            return f"{name} is {json_text(value)[:40]}, not {_type_names(types)}"
        if isinstance(value, int | float) and value < 0:
            return f"{name} is negative ({value})"
    return ""


def _type_names(types: tuple[type, ...]) -> str:
    if str in types:
        return "text"
    return "a number or null" if type(None) in types else "a number"


class _Sink:
    """The results file: header first, then one flushed line per finished row."""

    def __init__(self, path: Path | None, spec: SweepSpec, valid_end: int) -> None:
        self.handle: IO[bytes] | None = None
        if path is None:
            return
        try:
            self.handle = open_stream(path, valid_end)
        except OSError as exc:  # a missing folder, no permission (the API checks no path first)
            raise UsageError(f"cannot write: {exc.strerror or exc}", file=str(path)) from None
        if valid_end == 0:
            self.write(spec.header())

    def write(self, record: Mapping[str, Any]) -> None:
        if self.handle is not None:
            self.handle.write(json_text(record).encode() + b"\n")
            self.handle.flush()

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()


class Runner(Protocol):
    """Runs pending points somewhere else (a cluster) instead of the local pool: ``record``
    once for every item, in any order, from the calling thread; ``point_s`` is one point's
    time in-process, for sizing batches."""

    def __call__(self, spec: SweepSpec, items: Items, record: Record, point_s: float) -> None:
        ...


def run_sweep(spec: SweepSpec, out_jsonl: Path | None = None, jobs: int = 1,
              progress: Progress | None = None, fresh: bool = False,
              runner: Runner | None = None) -> SweepResult:
    """Every point's row, in point order; rows stream to ``out_jsonl`` (resumed when it holds
    the same spec, unless ``fresh``). The first pending point runs in-process first: a
    UsageError there (an unknown axis) raises before any file is touched. The other points run
    on ``runner`` when given, else in-process (``jobs`` 1) or on a pool of ``jobs``
    processes."""
    pts = list(points(spec))
    names = spec.axis_names
    keys = [point_key(p, names) for p in pts]
    done, valid_end = ({}, 0) if fresh or out_jsonl is None else read_results(out_jsonl, spec)
    resumed = len(done)
    pending = [i for i, k in enumerate(keys) if k not in done]
    started = time.perf_counter()
    first = evaluate_row(spec.target, pts[pending[0]], spec.metrics, strict=True) \
        if pending else None
    first_s = time.perf_counter() - started
    sink = _Sink(out_jsonl, spec, valid_end)
    try:
        finished = len(done)

        def record(i: int, row: Row) -> None:
            nonlocal finished
            done[keys[i]] = row
            sink.write(row)
            finished += 1
            if progress is not None:
                progress(finished, len(pts))

        if progress is not None:
            progress(finished, len(pts))
        if first is not None:
            record(pending.pop(0), first)
        rest = [(i, pts[i]) for i in pending]
        if runner is not None and rest:
            runner(spec, _costly_first(rest), record, first_s)
        elif jobs <= 1 or len(rest) <= 1:
            for i, point in rest:
                record(i, evaluate_row(spec.target, point, spec.metrics))
        else:
            _run_pool(spec, _costly_first(rest), jobs, record, first_s)
    finally:
        sink.close()
    rows = [done[k] for k in keys]
    if out_jsonl is not None and (resumed or jobs > 1 or runner is not None):
        _rewrite_sorted(out_jsonl, spec, rows)
    failed = sum(1 for r in rows if "error" in r)
    skipped = sum(1 for r in rows if NOT_APPLICABLE in r)
    counts = SweepCounts(ok=len(rows) - failed - skipped, failed=failed, resumed=resumed,
                         computed=len(rows) - resumed, not_applicable=skipped)
    return SweepResult(spec, rows, columns(spec.metrics, spec.target), counts)


def _costly_first(items: Items) -> Items:
    """Largest sizes first, so the slowest points do not all start last (a shorter tail)."""
    def size(item: tuple[int, dict[str, Value]]) -> float:
        value = item[1].get("size", 0)
        return float(value) if isinstance(value, int | float) else 0.0

    return sorted(items, key=lambda item: -size(item))


def chunks(items: Items, jobs: int, point_s: float, chunk_s: float = CHUNK_S,
           max_points: int = MAX_CHUNK_POINTS) -> list[Items]:
    """Chunks of about ``chunk_s`` each (by the first point's time), at least 4 per worker."""
    by_time = int(chunk_s / max(point_s, 1e-6))
    size = max(1, min(max_points, by_time, math.ceil(len(items) / (4 * jobs))))
    return [items[c:c + size] for c in range(0, len(items), size)]


def _run_pool(spec: SweepSpec, items: Items, jobs: int, record: Record, point_s: float) -> None:
    batches = chunks(items, jobs, point_s)
    workers = min(jobs, len(batches))
    with _memory_shared(workers):
        _pool(spec, batches, workers, record)


@contextlib.contextmanager
def _memory_shared(workers: int) -> Iterator[None]:
    """The workers share this process's memory limit (SIM_MEMORY) unless the user set it:
    each gets its part, so that together they stay under it."""
    if os.environ.get(SIM_MEMORY.env) or workers < 2:
        yield
        return
    os.environ[SIM_MEMORY.env] = str(max(SIM_MEMORY.value // workers, 1))
    try:
        yield
    finally:
        del os.environ[SIM_MEMORY.env]


def _pool(spec: SweepSpec, batches: list[Items], workers: int, record: Record) -> None:
    pool = ProcessPoolExecutor(max_workers=workers, initializer=_ignore_sigint)
    try:
        futures: set[Future[list[tuple[int, Row]]]] = {
            pool.submit(evaluate_chunk, spec.target, spec.metrics, c) for c in batches}
        while futures:
            ready, futures = wait(futures, return_when=FIRST_COMPLETED)
            for future in ready:
                for i, row in future.result():
                    record(i, row)
    except BaseException:
        _stop(pool)
        raise
    pool.shutdown()


def _stop(pool: ProcessPoolExecutor) -> None:
    """Cancel what has not started and end the workers now (they ignore Ctrl-C)."""
    workers = dict(getattr(pool, "_processes", None) or {})  # no public way before 3.14
    pool.shutdown(wait=False, cancel_futures=True)
    for process in workers.values():
        if process.is_alive():
            process.terminate()
    for process in workers.values():
        process.join(STOP_GRACE_S)
        if process.is_alive():
            process.kill()


def _rewrite_sorted(path: Path, spec: SweepSpec, rows: Sequence[Row]) -> None:
    """The finished file in point order (atomic: the streamed file stays until replaced)."""
    write_atomic(path, b"".join(json_text(record).encode() + b"\n"
                                for record in (spec.header(), *rows)))
