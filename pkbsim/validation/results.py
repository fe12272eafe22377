"""The results of a validation run (``DIR/results.json``, schema ``pkbsim.validation/1``).

A run is an ``environment`` (what machine, which software) and ``cases[]``. Each case holds
its status (ok, waived, failed, timeout) and ``measurements[]``: one measured operation each.
A measurement names its ``op`` (the catalogue below says what each op is and how it is timed),
``size_bytes`` (0 where the op moves no payload, e.g. a kernel launch), ``time_us`` (the median
of ``repeats`` timings), ``bandwidth_GBps`` (``size_bytes / time``, None where size is 0) and
the parameters swept (``params``: blocks, direction, src, dst, collective, world_size ...).

Loading validates every field once; a bad file is one error naming the file and the field.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pkbsim.bounds import check, check_int
from pkbsim.errors import PkbsimError
from pkbsim.files import json_text
from pkbsim.inputs import loads_json, path_kind, read_bytes

SCHEMA = "pkbsim.validation/1"
STATUSES = ("ok", "waived", "failed", "timeout")

# op -> what it is. GPU times are CUDA-event times unless the text says host.
OPS: dict[str, str] = {
    # HBM (one GPU)
    "d2d_copy_engine": "device-to-device copy of size_bytes by cudaMemcpyAsync (copy engine), "
                       "GPU time of one copy; HBM moves 2 x size_bytes",
    "d2d_sm_copy": "device-to-device copy of size_bytes by an SM kernel with 16-byte accesses "
                   "on params.blocks thread blocks, GPU time of one launch",
    # launches (one GPU)
    "launch_graph_node": "GPU time per empty-kernel node of a CUDA graph replay",
    "launch_eager_queued": "GPU time per empty kernel launched eagerly, the queue filled ahead "
                           "(the GPU-side cost of a launch)",
    "launch_eager_host": "host time per eager empty-kernel launch from a Python loop (CuPy)",
    "launch_sync_roundtrip": "wall time of one empty-kernel launch plus stream synchronise",
    # host dispatch (PyTorch)
    "host_torch_op": "steady time per eager PyTorch op (torch.add, 1,024 elements) issued from "
                     "a Python loop: max(host, GPU) per op; params host_us and gpu_us",
    "host_dist_call": "steady time per eager torch.distributed call (NCCL, params.world_size "
                      "ranks, 2 KiB) from a Python loop; params collective, host_us, gpu_us",
    "host_item_sync": "wall time of .item() on a one-element tensor with the stream idle",
    "host_synchronize": "wall time of torch.cuda.synchronize() with the device idle",
    # PyTorch's own kernels and PKB's programs (one GPU)
    "kernel_kind": "device time per call of one PyTorch operator (params.op) at one size, "
                   "from a CUDA graph replay (params.timing); size_bytes is the bytes read "
                   "plus written as pkbsim's trace recorder counts them; params kind, kernels, "
                   "flops, tensor_core",
    "pkb_reference": "PKB's reference (params.problem) at one rank, in a fresh process, timed "
                     "by PKB's harness: time_us is PKB's mean per call (500 warm-up, 100 "
                     "timed); params rows, cols, rep, median_us, host_issue_us",
    "grpo_blog": "PKB's problem 83 at the blog's sizes at one rank (params seq, vocab), mean "
                 "per call of 30 timed after 20 warm-up; params rep, host_issue_us",
    # host <-> device (one GPU)
    "h2d_pinned": "host-to-device copy of size_bytes from pinned memory, GPU time of one copy",
    "d2h_pinned": "device-to-host copy of size_bytes to pinned memory, GPU time of one copy",
    # peers (two or more GPUs)
    "peer_copy_engine": "copy engine peer copy of size_bytes, params src, dst and direction "
                        "(uni, or bidir: both directions at once, bandwidth per direction)",
    "peer_sm_ldst": "SM kernel moving size_bytes to (push) or from (pull) a peer with 16-byte "
                    "loads and stores on params.blocks blocks; params src, dst, mode",
    "peer_tma": "TMA bulk-copy kernel (cp.async.bulk) moving size_bytes to a peer on "
                "params.blocks blocks; params src, dst",
    "peer_flag_roundtrip": "round trip of a flag written to a peer's memory and answered "
                           "(ping-pong), per exchange; params src, dst",
    "nccl_collective": "one NCCL collective through torch.distributed, GPU time per call of a "
                       "back-to-back loop; size_bytes is nccl-tests' S; params collective, "
                       "world_size, algbw_GBps, busbw_GBps, nccl_algo, nccl_proto",
}

LATENCY_BOUND_BYTES = 64 * 1024  # below: latency-bound regime
BANDWIDTH_BOUND_BYTES = 1024 * 1024  # at or above: bandwidth-bound regime


class ResultsError(PkbsimError):
    """A results file is missing, malformed or of another schema."""


@dataclass(frozen=True)
class Measurement:
    op: str
    size_bytes: int
    time_us: float  # median
    bandwidth_GBps: float | None  # size_bytes / time; None where size is 0
    repeats: int = 1
    min_us: float | None = None
    max_us: float | None = None
    params: dict[str, Any] = field(default_factory=dict, hash=False)

    @property
    def time_s(self) -> float:
        return self.time_us * 1e-6

    @property
    def regime(self) -> str:
        """latency (under 64 KiB, or no payload), bandwidth (1 MiB and over), or middle."""
        if self.size_bytes < LATENCY_BOUND_BYTES:
            return "latency"
        return "bandwidth" if self.size_bytes >= BANDWIDTH_BOUND_BYTES else "middle"


def measurement(op: str, size_bytes: int, times_us: list[float], **params: Any) -> Measurement:
    """A measurement from raw timings (median, min, max); the GPU scripts build theirs alike."""
    ordered = sorted(times_us)
    n = len(ordered)
    median = ordered[n // 2] if n % 2 else 0.5 * (ordered[n // 2 - 1] + ordered[n // 2])
    bw = size_bytes / (median * 1e-6) / 1e9 if size_bytes and median > 0 else None
    return Measurement(op, size_bytes, median, bw, n, ordered[0], ordered[-1], params)


@dataclass(frozen=True)
class CaseResult:
    key: str
    description: str
    gpus: int  # GPUs the case needs
    status: str  # ok | waived | failed | timeout
    measurements: tuple[Measurement, ...] = ()
    error: str | None = None  # why failed / timed out / waived
    elapsed_s: float = 0.0
    command: tuple[str, ...] = ()
    data: dict[str, Any] = field(default_factory=dict, hash=False)  # e.g. captured text


@dataclass(frozen=True)
class Results:
    environment: dict[str, Any]
    cases: tuple[CaseResult, ...]
    options: dict[str, Any] = field(default_factory=dict, hash=False)
    file: str = ""

    def measurements(self, op: str | None = None) -> list[tuple[CaseResult, Measurement]]:
        """Every measurement of cases that ran (ok, or failed part-way), optionally of one op."""
        return [(c, m) for c in self.cases for m in c.measurements if op is None or m.op == op]

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "environment": self.environment, "options": self.options,
                "cases": [_case_json(c) for c in self.cases]}


def _case_json(case: CaseResult) -> dict[str, Any]:
    out = asdict(case)
    out["command"] = list(case.command)
    out["measurements"] = [asdict(m) for m in case.measurements]
    return out


def dumps(results: Results) -> str:
    return json_text(results.to_json(), indent=1, sort_keys=False) + "\n"


def load(path: str | Path) -> Results:
    """Read and check ``path`` (a results.json, or a folder holding one)."""
    p = Path(path)
    if path_kind(p, error=ResultsError) == "folder":
        p = p / "results.json"
    name = str(p)
    raw = loads_json(read_bytes(p, error=ResultsError), file=name, error=ResultsError)
    return parse(raw, name)


def parse(raw: Any, name: str = "<results>") -> Results:
    def fail(where: str, what: str) -> ResultsError:
        return ResultsError(what, file=name, field=where)

    if not isinstance(raw, dict):
        raise fail("(top)", "expected a JSON object")
    if raw.get("schema") != SCHEMA:
        raise fail("schema", f"expected {SCHEMA!r}, got {raw.get('schema')!r}")
    env = raw.get("environment")
    if not isinstance(env, dict):
        raise fail("environment", "expected an object")
    options = raw.get("options", {})
    if not isinstance(options, dict):
        raise fail("options", "expected an object")
    cases_raw = raw.get("cases")
    if not isinstance(cases_raw, list):
        raise fail("cases", "expected a list")
    cases = []
    for i, c in enumerate(cases_raw):
        where = f"cases[{i}]"
        if not isinstance(c, dict):
            raise fail(where, "expected an object")
        key = _get(c, "key", str, where, fail)
        status = _get(c, "status", str, where, fail)
        if status not in STATUSES:
            raise fail(f"{where}.status", f"expected one of {', '.join(STATUSES)}, "
                                          f"got {status!r}")
        ms_raw = c.get("measurements", [])
        if not isinstance(ms_raw, list):
            raise fail(f"{where}.measurements", "expected a list")
        ms = tuple(_measurement(m, f"{where}.measurements[{j}]", fail, name)
                   for j, m in enumerate(ms_raw))
        command = c.get("command", [])
        data = c.get("data", {})
        if not isinstance(command, list) or not all(isinstance(a, str) for a in command):
            raise fail(f"{where}.command", "expected a list of strings")
        if not isinstance(data, dict):
            raise fail(f"{where}.data", "expected an object")
        error = c.get("error")
        if error is not None and not isinstance(error, str):
            raise fail(f"{where}.error", "expected a string or null")
        cases.append(CaseResult(
            key=key, description=str(c.get("description", "")),
            gpus=_count(c, "gpus", where, name), status=status, measurements=ms, error=error,
            elapsed_s=check(_get(c, "elapsed_s", (int, float), where, fail, 0.0), "us",
                            source=name, field=f"{where}.elapsed_s", error=ResultsError),
            command=tuple(command), data=data))
    return Results(env, tuple(cases), options, name)


def _get(obj: dict[str, Any], key: str, kind: Any, where: str, fail: Any,
         default: Any = ...) -> Any:
    if key not in obj:
        if default is not ...:
            return default
        raise fail(f"{where}.{key}", "is required but missing")
    value = obj[key]
    if isinstance(value, bool) or not isinstance(value, kind):
        raise fail(f"{where}.{key}", f"expected {_kind_name(kind)}, got {value!r}")
    return value


def _kind_name(kind: Any) -> str:
    if kind is str:
        return "a string"
    if kind is int:
        return "an integer"
    return "a number"


def _measurement(m: Any, where: str, fail: Any, file: str) -> Measurement:
    if not isinstance(m, dict):
        raise fail(where, "expected an object")
    op = _get(m, "op", str, where, fail)
    if op not in OPS:
        raise fail(f"{where}.op", f"unknown op {op!r}")
    def number(key: str, quantity: str) -> float:
        return check(m[key], quantity, source=file, field=f"{where}.{key}", error=ResultsError)

    size = int(check(_get(m, "size_bytes", int, where, fail), "bytes", source=file,
                     field=f"{where}.size_bytes", error=ResultsError))
    time_us = float(_get(m, "time_us", (int, float), where, fail))
    if not time_us > 0:
        raise fail(f"{where}.time_us", f"expected a time > 0, got {time_us}")
    time_us = number("time_us", "measured_us")
    bw = m.get("bandwidth_GBps")
    if bw is not None and (isinstance(bw, bool) or not isinstance(bw, (int, float))):
        raise fail(f"{where}.bandwidth_GBps", f"expected a number or null, got {bw!r}")
    if bw is not None:
        bw = number("bandwidth_GBps", "measured_GBps")
    params = m.get("params", {})
    if not isinstance(params, dict):
        raise fail(f"{where}.params", "expected an object")
    opt = {}
    for key in ("min_us", "max_us"):
        v = m.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise fail(f"{where}.{key}", f"expected a number or null, got {v!r}")
        opt[key] = None if v is None else number(key, "measured_us")
    return Measurement(op, size, time_us, None if bw is None else float(bw),
                       _count(m, "repeats", where, file, 1), opt["min_us"], opt["max_us"],
                       params)


def _count(obj: dict[str, Any], key: str, where: str, file: str | None,
           default: int | None = None) -> int:
    """A whole number >= 0 (GPUs, repeats)."""
    if key not in obj and default is not None:
        return default
    if key not in obj:
        raise ResultsError("is required but missing", file=file, field=f"{where}.{key}")
    return check_int(obj[key], "count", source=file, field=f"{where}.{key}",
                     error=ResultsError)
