"""Read a PyTorch profiler (Kineto) trace: the Chrome trace JSON that ``torch.profiler``'s
``export_chrome_trace`` writes, plain or gzip-compressed.

Only the documented fields of the Chrome trace event format and Kineto's categories are read
(complete events, ``"ph": "X"``, with ``ts`` and ``dur`` in µs):

- GPU work: ``kernel``, ``gpu_memcpy``, ``gpu_memset``, with ``args.correlation`` and
  ``args.stream``;
- the host's CUDA calls: ``cuda_runtime``, ``cuda_driver`` (``args.correlation`` ties a launch to
  its kernel);
- host operators: ``cpu_op`` (``aten::mm``, ``c10d::allreduce_``), ``user_annotation``
  (``record_function`` ranges, ``ProfilerStep#<n>``), ``python_function`` (``with_stack=True``);
- ``distributedInfo.rank`` / ``world_size`` where torch.distributed was initialised.

HTA's parser would also read these files, but it brings pandas and wants its own folder layout;
the fields above are all the decomposition uses.

**Calls.** A call is, in this order of preference: a ``ProfilerStep#<n>`` range (torch.profiler's
schedule, ``pkbsim run``), a range named by ``call_marker`` (a ``record_function`` name, an
operator, or a Python function with ``with_stack=True``), a ``solution`` Python function (PKB's
``--profile`` traces), else the whole trace as one call. Nested ranges count once (the
outermost). The thread holding the calls is the calling thread; the others' operators are read
only to class the kernels they launch.

**Windows.** Call k's host span is ``[s_k, h_k]``; its GPU work is every GPU operation whose
launch lies in that span; its window ends at ``e_k = max(b_k, end of its GPU work)``, its
boundary ``b_k`` being the end of the first CUDA event record between it and the next call
(``pkbsim run`` records one there), else, back to back (no blocking call between them, PKB's
timed loop), the next call's host start, else (a synchronisation between them, PKB's
``--profile`` loop, and the last call) its host end. The window is ``[max(s_k, e_{k-1}),
e_k]`` (the first: from the last event record before it, if any), so back-to-back calls tile
the time as CUDA events recorded between them do.

**Kinds.** A GPU operation launched inside an ATen operator takes that operator's kernel kind
(``pkbsim.trace.classes``: the kinds the traced reference uses), with the kernel's name deciding
an operator the table does not list (``elementwise``, ``reduce``); an NCCL kernel, a peer copy
(``Memcpy PtoP``, or a copy a ``cudaMemcpyPeer*`` call launched) is communication; a memcpy or
memset outside any operator is ``copy`` or ``fill``; any other kernel is read by its name (GEMM
libraries, FFT, flash attention), else ``custom``.

Every malformed input is one :class:`TraceFileError` naming the file and the field.
"""

from __future__ import annotations

import bisect
import json
import math
import re
import zlib
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pkbsim.errors import PkbsimError
from pkbsim.inputs import path_kind, read_bytes
from pkbsim.limits import KINETO_TRACE_BYTES
from pkbsim.timeline.events import Call, GpuOp, HostSpan, Timeline
from pkbsim.trace import classes


class TraceFileError(PkbsimError):
    """A Kineto trace is missing, unreadable or malformed."""


GPU_CATS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset",
            "Kernel": "kernel", "Memcpy": "memcpy", "Memset": "memset"}  # older Kineto: titles
RUNTIME_CATS = ("cuda_runtime", "cuda_driver", "Runtime", "Driver")
HOST_CATS = ("cpu_op", "user_annotation", "python_function", "Operator")
STEP = re.compile(r"^ProfilerStep#\d+$")
SOLUTION = ": solution"  # a python_function event's name ends so for ``def solution``
SYNC_CALLS = frozenset({
    "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize",
    "cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize", "cudaMemcpy",
    "cudaMemcpy2D", "cuMemcpyDtoH", "cuMemcpyDtoH_v2", "cudaMemcpyFromSymbol"})
PEER_COPY_CALLS = ("cudaMemcpyPeer", "cuMemcpyPeer")
RECORDS = ("cudaEventRecord", "cuEventRecord")  # a CUDA event recorded between calls
COMM_OPS = ("c10d::", "_c10d_functional::", "nccl:", "record_param_comms")
# kernels no operator explains, by name (lower case); first match wins
NAME_KINDS = (("nccl", "communication"), ("gemm", "gemm"), ("cutlass", "gemm"),
              ("nvjet", "gemm"), ("xmma", "gemm"), ("fft", "fft"), ("flash", "attention"),
              ("fmha", "attention"), ("softmax", "reduction"), ("reduce", "reduction"),
              ("elementwise", "elementwise"), ("radixsort", "sort"), ("scan", "scan"))
TRACE_SUFFIXES = (".json", ".json.gz", ".pt.trace.json", ".pt.trace.json.gz")
_RANK_IN_NAME = re.compile(r"rank[_-]?(\d{1,7})")


@dataclass(slots=True)
class RawEvent:
    ts: float
    end: float
    name: str
    tid: Any
    cat: str = ""
    corr: int | None = None
    stream: int = 0


@dataclass(frozen=True)
class ParsedTrace:
    """A trace's events split by kind, its rank, and its calls on the calling thread."""

    name: str
    gpu: list[RawEvent]
    runtime: list[RawEvent]
    host: list[RawEvent]
    rank: int
    world_size: int
    markers: list[RawEvent]  # one per call
    how: str  # how the calls were found
    main: Any  # the calling thread


def parse_trace(path: str | Path, call_marker: str | None = None) -> ParsedTrace:
    """Read and split one trace, and find its calls (the module docstring says how)."""
    name = str(path)
    data = read_trace_json(path)
    events = data.get("traceEvents") if isinstance(data, dict) else None
    if not isinstance(events, list):
        raise TraceFileError("expected a Chrome trace object with a traceEvents list",
                             file=name, field="traceEvents")
    gpu, runtime, host = split_events(events, name)
    if not gpu and not host:
        raise TraceFileError("no complete events (ph X) of the kinds a PyTorch profiler trace "
                             "holds (kernel, cuda_runtime, cpu_op)", file=name,
                             field="traceEvents")
    rank, world = rank_of(data, name)
    markers, how, main = find_calls(host, runtime, call_marker, name)
    return ParsedTrace(name, gpu, runtime, host, rank, world, markers, how, main)


def load_kineto(path: str | Path, call_marker: str | None = None) -> Timeline:
    """One rank's trace as a :class:`Timeline`."""
    t = parse_trace(path, call_marker)
    name, gpu, runtime, host = t.name, t.gpu, t.runtime, t.host
    rank, world, markers, how, main = t.rank, t.world_size, t.markers, t.how, t.main
    ops = _gpu_ops(gpu, runtime, host, markers)
    main_host = [h for h in host if h.tid == main]
    outer = _outermost([h for h in main_host if h.cat not in ("python_function",)
                        and not STEP.match(h.name) and h.name != call_marker])
    syncs = sorted((HostSpan(r.ts, r.end, r.name) for r in runtime
                    if r.tid == main and _base(r.name) in SYNC_CALLS),
                   key=lambda s: s.start_us)
    records = sorted(r.end for r in runtime if r.tid == main and r.name.startswith(RECORDS))
    calls = _windows(markers, ops, syncs, records)
    return Timeline(name, rank, world, tuple(calls), tuple(ops),
                    tuple(HostSpan(h.ts, h.end, h.name) for h in outer), tuple(syncs), how)


def read_trace_json(path: str | Path) -> Any:
    """The trace's JSON (gzip-compressed when its name ends in .gz or its bytes say so),
    bounded by KINETO_TRACE_BYTES before and after decompression."""
    name = str(path)
    data = read_bytes(path, limit=KINETO_TRACE_BYTES, error=TraceFileError)
    if data[:2] == b"\x1f\x8b":
        data = _gunzip(data, name)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TraceFileError(f"not UTF-8 JSON (byte {exc.start})", file=name) from None

    def no_constant(word: str) -> Any:
        raise ValueError(f"{word} is not a number pkbsim accepts")

    try:
        return json.loads(text, parse_constant=no_constant)
    except RecursionError:
        raise TraceFileError("not JSON pkbsim reads: nested too deeply", file=name) from None
    except ValueError as exc:
        raise TraceFileError(f"not JSON ({' '.join(str(exc).split())[:200]})",
                             file=name) from None


def _gunzip(data: bytes, name: str) -> bytes:
    limit = KINETO_TRACE_BYTES.value
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(data, limit + 1)
    except zlib.error as exc:
        raise TraceFileError(f"not a readable gzip file ({exc})", file=name) from None
    if len(out) > limit or inflater.unconsumed_tail:
        raise KINETO_TRACE_BYTES.exceeded(len(out), "decompressed size", TraceFileError, name)
    if not inflater.eof:
        raise TraceFileError("a gzip file that ends early (truncated?)", file=name)
    return out


_INF = math.inf


def split_events(events: list[Any], name: str
                 ) -> tuple[list[RawEvent], list[RawEvent], list[RawEvent]]:
    """The complete events read: GPU work, the host's CUDA calls, host ranges; each sorted."""
    gpu: list[RawEvent] = []
    runtime: list[RawEvent] = []
    host: list[RawEvent] = []
    runtime_cats = frozenset(RUNTIME_CATS)
    host_cats = frozenset(HOST_CATS)
    for i, e in enumerate(events):
        if type(e) is not dict or e.get("ph") != "X":
            continue
        cat = e.get("cat")
        ename = e.get("name")
        if type(cat) is not str or type(ename) is not str:
            continue
        kind = GPU_CATS.get(cat)
        if kind is None and cat not in runtime_cats and cat not in host_cats and \
                not (ename.startswith("ProfilerStep#") and STEP.match(ename)):
            continue  # flows, annotations on the GPU, memory events, the trace's own span
        ts: Any = e.get("ts")
        dur: Any = e.get("dur", 0)
        if type(ts) not in (float, int) or not -_INF < ts < _INF:
            raise TraceFileError("expected a finite number of µs", file=name,
                                 field=f"traceEvents[{i}].ts")
        if type(dur) not in (float, int) or not 0 <= dur < _INF:
            raise TraceFileError("expected a finite number of µs, 0 or more", file=name,
                                 field=f"traceEvents[{i}].dur")
        args = e.get("args")
        corr = args.get("correlation") if type(args) is dict else None
        raw = RawEvent(ts, ts + dur, ename, e.get("tid"), kind or cat,
                   corr if type(corr) is int else None)
        if kind is not None:
            stream = args.get("stream", e.get("tid")) if type(args) is dict else e.get("tid")
            raw.stream = stream if type(stream) is int else 0
            gpu.append(raw)
        elif cat in runtime_cats:
            runtime.append(raw)
        else:
            host.append(raw)
    for lst in (gpu, runtime, host):
        lst.sort(key=lambda r: (r.ts, -r.end))
    return gpu, runtime, host


def rank_of(data: dict[str, Any], name: str) -> tuple[int, int]:
    info = data.get("distributedInfo")
    if isinstance(info, dict):
        rank, world = info.get("rank"), info.get("world_size")
        if isinstance(rank, int) and isinstance(world, int) and 0 <= rank < world:
            return rank, world
    m = _RANK_IN_NAME.search(Path(name).name)
    return (int(m.group(1)), int(m.group(1)) + 1) if m else (0, 1)


def _outermost(spans: Iterable[RawEvent]) -> list[RawEvent]:
    out: list[RawEvent] = []
    for s in spans:  # sorted by (start, -end)
        if out and s.ts < out[-1].end:
            continue
        out.append(s)
    return out


def find_calls(host: list[RawEvent], runtime: list[RawEvent], marker: str | None, name: str
           ) -> tuple[list[RawEvent], str, Any]:
    steps = [h for h in host if STEP.match(h.name)]
    if steps:
        found, how = steps, "ProfilerStep annotations"
    elif marker is not None:
        found = [h for h in host if h.name == marker or h.name.endswith(f": {marker}")]
        if not found:
            raise TraceFileError(f"no range named {marker!r} (a record_function name, an "
                                 "operator, or a Python function traced with with_stack)",
                                 file=name, field="--call-marker")
        how = f"ranges named {marker!r}"
    else:
        found = [h for h in host if h.cat == "python_function" and h.name.endswith(SOLUTION)]
        how = "calls of solution() (with_stack)"
    if found:
        main = Counter(h.tid for h in found).most_common(1)[0][0]
        return _outermost(h for h in found if h.tid == main), how, main
    threads = Counter(r.tid for r in runtime) or Counter(h.tid for h in host)
    main = threads.most_common(1)[0][0]
    mine = [h for h in host if h.tid == main] + [r for r in runtime if r.tid == main]
    start = min(h.ts for h in mine)
    end = max(h.end for h in mine)
    return [RawEvent(start, end, "trace", main)], "the whole trace (no call markers)", main


def _launchers(runtime: list[RawEvent], host: list[RawEvent]
               ) -> dict[int, tuple[RawEvent, str | None, bool]]:
    """Per correlation id: the runtime call, the innermost ATen operator around it, and
    whether a communication operator encloses it."""
    ops_by_thread: dict[Any, list[RawEvent]] = {}
    for h in host:
        if h.cat != "python_function" and not STEP.match(h.name):
            ops_by_thread.setdefault(h.tid, []).append(h)
    out: dict[int, tuple[RawEvent, str | None, bool]] = {}
    by_thread: dict[Any, list[RawEvent]] = {}
    for r in runtime:
        if r.corr is not None:
            by_thread.setdefault(r.tid, []).append(r)
    for tid, calls in by_thread.items():
        ops = ops_by_thread.get(tid, [])
        stack: list[RawEvent] = []
        i = 0
        for r in calls:  # sorted by start
            while i < len(ops) and ops[i].ts <= r.ts:
                while stack and stack[-1].end < ops[i].ts:
                    stack.pop()
                stack.append(ops[i])
                i += 1
            while stack and stack[-1].end < r.ts:
                stack.pop()
            live = [s for s in stack if s.ts <= r.ts <= s.end]
            aten = next((s.name for s in reversed(live) if s.name.startswith("aten::")), None)
            comm = any(s.name.startswith(COMM_OPS) for s in live)
            assert r.corr is not None
            out[r.corr] = (r, aten, comm)
    return out


def _kind(op: RawEvent, aten: str | None, launcher: str) -> tuple[str, bool]:
    lname = op.name.lower()
    if "nccl" in lname or (op.cat == "memcpy" and "ptop" in lname) or \
            launcher.startswith(PEER_COPY_CALLS):
        return "communication", True
    if aten is not None:
        kind = classes.kind_of(aten.replace("::", ".", 1), pointwise=False)
        if kind != "other":
            return kind, False
        if op.cat == "memcpy":
            return "copy", False
        if op.cat == "memset":
            return "fill", False
        return next((k for word, k in NAME_KINDS if word in lname), "elementwise"), False
    if op.cat == "memcpy":
        return "copy", False
    if op.cat == "memset":
        return "fill", False
    return next((k for word, k in NAME_KINDS if word in lname), "custom"), False


def _gpu_ops(gpu: list[RawEvent], runtime: list[RawEvent], host: list[RawEvent],
             markers: list[RawEvent]) -> list[GpuOp]:
    launch = _launchers(runtime, host)
    starts = [m.ts for m in markers]
    out = []
    for g in gpu:
        entry = launch.get(g.corr) if g.corr is not None else None
        call = -1
        aten: str | None = None
        launcher = ""
        in_collective = False
        if entry is not None:
            r, aten, in_collective = entry
            launcher = r.name
            k = bisect.bisect_right(starts, r.ts) - 1
            if k >= 0 and r.ts <= markers[k].end:
                call = k
        kind, comm = _kind(g, aten, launcher)
        if entry is not None and in_collective and not comm:  # c10d's own copies
            kind, comm = "communication", True
        out.append(GpuOp(g.ts, g.end, g.name, kind, comm, call, g.stream))
    return out  # in the order of ``gpu``: by start


def _windows(markers: list[RawEvent], ops: list[GpuOp], syncs: list[HostSpan],
             records: list[float]) -> list[Call]:
    """Each call's window, as CUDA events recorded between the calls would time it.

    A call ends at the later of the end of its GPU work and its boundary: the end of the
    first event record (``cudaEventRecord``, ``records``: their ends, sorted) after its host
    end and before the next call and any synchronisation, where there is one (``pkbsim
    run``'s profile); else, back to
    back (no blocking call between the two calls), the next call's host start; else (a
    synchronisation between them, PKB's ``--profile`` loop) its own host end. The last call's
    boundary is the first record after its host end, else its host end. The first call starts
    at the end of the last record before it, else at its host start; a later call where the
    previous one ended, or at its host start if that is later."""
    ends: dict[int, float] = {}
    for o in ops:
        if o.call >= 0:
            ends[o.call] = max(ends.get(o.call, o.end_us), o.end_us)
    sync_starts = [sp.start_us for sp in syncs]
    calls = []
    before = bisect.bisect_left(records, markers[0].ts) - 1 if markers else -1
    previous = records[before] if before >= 0 else -math.inf
    tiled = previous > -math.inf  # does this call start where the last boundary was?
    for k, m in enumerate(markers):
        nxt = markers[k + 1].ts if k + 1 < len(markers) else math.inf
        i = bisect.bisect_right(records, m.end)
        j = bisect.bisect_left(sync_starts, m.end)
        blocked = j < len(sync_starts) and sync_starts[j] < nxt
        first_sync = sync_starts[j] if j < len(sync_starts) else math.inf
        if i < len(records) and records[i] < min(nxt, first_sync):
            boundary, tile_next = records[i], True
        elif k + 1 < len(markers) and not blocked:
            boundary, tile_next = nxt, True
        else:
            boundary, tile_next = m.end, False
        end = max(boundary, ends.get(k, boundary))
        start = previous if tiled else max(m.ts, previous)
        start = min(start, end)
        calls.append(Call(k, m.ts, m.end, start, end))
        previous, tiled = end, tile_next
    return calls


def _base(name: str) -> str:
    return name.split("_v", 1)[0] if name.endswith(("_v2", "_v3")) else name


# --- folders and ranks --------------------------------------------------------------------------

def trace_files(path: str | Path) -> list[Path]:
    """The trace files a path names: itself, or the traces in a folder and below it (PKB's
    ``logs/problem_<stem>/<backend>/[trial_<t>/]traces/rank_<r>.json``, ``pkbsim run``'s
    ``rank_<r>_trace.json.gz``, TensorBoard's ``*.pt.trace.json[.gz]``), sorted."""
    kind = path_kind(path, error=TraceFileError)
    if kind == "missing":
        raise TraceFileError("no such file or folder", file=str(path))
    if kind == "file":
        return [Path(path)]
    if kind != "folder":
        raise TraceFileError("not a regular file or folder", file=str(path))
    found = sorted(p for p in Path(path).rglob("*") if p.name.endswith(TRACE_SUFFIXES)
                   and ("trace" in p.name or p.parent.name == "traces") and p.is_file())
    if not found:
        raise TraceFileError("no Kineto trace here (*trace*.json[.gz], traces/rank_<r>.json)",
                             file=str(path))
    return found


def with_rank_waits(timelines: list[Timeline]) -> list[Timeline]:
    """Several ranks' timelines of one run, each NCCL kernel's wait for the last rank set:
    the k-th communication kernel of every rank is one collective (same count on every rank,
    else nothing is set); on rank r it waits ``max over ranks of its start - its start on r``
    (at most its duration). One clock: ranks of one host."""
    if len(timelines) < 2:
        return timelines
    comm = [[i for i, o in enumerate(t.gpu) if o.comm and "nccl" in o.name.lower()]
            for t in timelines]
    if len({len(c) for c in comm}) != 1:
        return timelines
    out = [list(t.gpu) for t in timelines]
    for k in range(len(comm[0])):
        latest = max(t.gpu[c[k]].start_us for t, c in zip(timelines, comm, strict=True))
        for r, (t, c) in enumerate(zip(timelines, comm, strict=True)):
            op = t.gpu[c[k]]
            wait = min(max(latest - op.start_us, 0.0), op.end_us - op.start_us)
            out[r][c[k]] = replace(op, wait_us=wait)
    return [replace(t, gpu=tuple(ops)) for t, ops in zip(timelines, out, strict=True)]
