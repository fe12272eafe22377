"""Run validation cases as child processes; keep every result on disk as soon as it exists.

``run_suite`` first probes the machine (``validate/environment.py``, a child process), then
runs each case's script in its own process group with a time limit:

    python validate/<script> --case KEY --out DIR/raw/KEY.jsonl [--quick] <case args>
    python -m torch.distributed.run --standalone --nproc-per-node N <script> ...  (torchrun)

The script appends JSON lines to ``DIR/raw/KEY.jsonl`` (``{"measurement": {...}}`` or
``{"data": {...}}``); its stdout and stderr go to ``DIR/logs/KEY.log``. Exit 0 is ``ok``, any
other exit ``failed`` (the log's last lines become the error), a case past its limit is killed
with its whole process group (``timeout``). Whatever lines were written are kept in every case.
``DIR/results.json`` is rewritten atomically after each case, merged with an earlier run on the
same machine, so a crash, hang or Ctrl-C never costs the cases already done.

Nothing here prints: progress goes to the ``on_event`` callback.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pkbsim import __version__
from pkbsim.datafiles import validate_dir
from pkbsim.errors import PkbsimError, UsageError
from pkbsim.files import write_atomic
from pkbsim.inputs import loads_json, read_text
from pkbsim.processes import (
    NO_MULTICAST,
    error_tail,
    exit_text,
    read_tail,
    run_in_group,
    run_short,
)
from pkbsim.validation.cases import Case, keys
from pkbsim.validation.results import (
    SCHEMA,
    CaseResult,
    Measurement,
    Results,
    ResultsError,
    dumps,
    load,
    parse,
)

PROBE_TIMEOUT_S = 120.0


class ValidationError(PkbsimError):
    """The machine could not be probed: the validate/ scripts are missing or broken."""


@dataclass(frozen=True)
class Event:
    """Progress of a run: ``environment`` (probed), ``start`` and ``done`` of each case."""

    kind: str
    index: int = 0
    total: int = 0
    case: Case | None = None
    result: CaseResult | None = None
    environment: dict[str, Any] | None = None
    limit_s: float = 0.0


OnEvent = Callable[[Event], None]


def probe_environment(scripts: Path) -> dict[str, Any]:
    """Run ``environment.py`` in a child process: GPUs, driver, CUDA, NCCL, torch, host."""
    script = scripts / "environment.py"
    if not script.is_file():
        raise ValidationError("no such script", file=str(script))
    try:
        run = run_short([sys.executable, str(script)], PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise ValidationError(f"timed out after {PROBE_TIMEOUT_S:g} s",
                              file=str(script)) from None
    lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
    env: Any = None
    if lines:
        with contextlib.suppress(PkbsimError):
            env = loads_json(lines[-1])
    if run.returncode != 0 or not isinstance(env, dict) or not _is_count(env.get("gpu_count")):
        raise ValidationError(f"probe failed (exit {run.returncode}): "
                              f"{error_tail(run.stderr) or 'no JSON object printed'}",
                              file=str(script))
    env["pkbsim_version"] = __version__
    return env


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def gpus_used(environment: dict[str, Any], gpus: int | None) -> int:
    """min(--gpus, GPUs present)."""
    present = int(environment.get("gpu_count") or 0)
    return present if gpus is None else min(gpus, present)


def waiver(case: Case, environment: dict[str, Any], gpus: int | None, allow_multicast: bool,
           nnodes: int = 1) -> str | None:
    """Why ``case`` cannot run here (it is then ``waived``), or None. torchrun cases count
    the GPUs of every node; single-process cases those of this node."""
    used = gpus_used(environment, gpus)
    available = used * nnodes if case.launcher == "torchrun" else used
    if case.gpus > available:
        plural = "s" if case.gpus > 1 else ""
        where = f"{used} per node x {nnodes} nodes" if case.launcher == "torchrun" and \
            nnodes > 1 else f"{available}"
        limit = f" (--gpus {gpus})" if gpus is not None and gpus < int(
            environment.get("gpu_count") or 0) else ""
        return f"needs {case.gpus} GPU{plural}, {where} present{limit}"
    if case.multicast and not allow_multicast:
        return "uses NVLink multicast; pass --allow-multicast"
    return None


def child_env(case: Case, environment: dict[str, Any], gpus: int | None,
              allow_multicast: bool) -> dict[str, str]:
    """os.environ + the case's env + multicast off (a multicast case's own env wins when
    --allow-multicast is given), the first N GPUs visible when --gpus is given."""
    env = {**os.environ, **case.env, **NO_MULTICAST, "PYTHONUNBUFFERED": "1"}
    if case.multicast and allow_multicast:
        env.update(case.env)
    if gpus is not None:
        used = gpus_used(environment, gpus)
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        ids = [v.strip() for v in visible.split(",") if v.strip()] if visible else \
            [str(i) for i in range(int(environment.get("gpu_count") or 0))]
        env["CUDA_VISIBLE_DEVICES"] = ",".join(ids[:used])
    return env


def child_command(case: Case, script: Path, raw: Path, quick: bool, nproc: int,
                  nnodes: int = 1, rdzv_endpoint: str | None = None) -> list[str]:
    tail = [str(script), "--case", case.key, "--out", str(raw),
            *(["--quick"] if quick else []), *case.args]
    if case.launcher == "python":
        return [sys.executable, *tail]
    if nnodes == 1:
        rdzv = ["--standalone"]
    else:
        rdzv = ["--nnodes", str(nnodes), "--rdzv-backend", "c10d", "--rdzv-endpoint",
                str(rdzv_endpoint), "--rdzv-id", f"pkbsim-{case.key}"]
    return [sys.executable, "-m", "torch.distributed.run", *rdzv, "--nproc-per-node",
            str(nproc), *tail]


def run_suite(cases: list[Case], out_dir: Path, gpus: int | None = None, quick: bool = False,
              allow_multicast: bool = False, timeout_s: float | None = None, nnodes: int = 1,
              rdzv_endpoint: str | None = None, on_event: OnEvent | None = None, *,
              scripts: Path | None = None, command: str = "") -> Results:
    """Run ``cases`` into ``out_dir``; returns the results as written to results.json."""
    scripts = scripts or validate_dir()
    out_dir = _prepare(out_dir)
    path = out_dir / "results.json"
    previous = _previous(path)
    environment = probe_environment(scripts)
    environment["command"] = command
    if previous is not None:
        _check_same_machine(previous, environment, path)
    emit = on_event or (lambda event: None)
    emit(Event("environment", total=len(cases), environment=environment))
    used = gpus_used(environment, gpus)
    options = {"gpus": gpus, "gpus_used": used, "quick": quick,
               "cases": [case.key for case in cases], "allow_multicast": allow_multicast,
               "timeout_s": timeout_s, "nnodes": nnodes, "rdzv_endpoint": rdzv_endpoint}
    done: list[CaseResult] = []
    results = _write(path, environment, options, previous, done)
    for index, case in enumerate(cases):
        limit_s = timeout_s if timeout_s is not None else case.limit_s(quick)
        emit(Event("start", index, len(cases), case, limit_s=limit_s))
        reason = waiver(case, environment, gpus, allow_multicast, nnodes)
        if reason is not None:
            result = CaseResult(case.key, case.description, case.gpus, "waived", error=reason)
        else:
            cmd = child_command(case, scripts / case.script,
                                out_dir / "raw" / f"{case.key}.jsonl", quick, used, nnodes,
                                rdzv_endpoint)
            env = child_env(case, environment, gpus, allow_multicast)
            try:
                result = run_case(case, scripts / case.script, cmd, env, out_dir, limit_s)
            except _Interrupted as stop:
                done.append(stop.result)
                _write(path, environment, options, previous, done)
                raise KeyboardInterrupt from None
        done.append(result)
        results = _write(path, environment, options, previous, done)
        emit(Event("done", index, len(cases), case, result=result, limit_s=limit_s))
    return results


def _prepare(out_dir: Path) -> Path:
    out_dir = out_dir.expanduser().absolute()
    try:
        for folder in (out_dir, out_dir / "raw", out_dir / "logs"):
            folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {out_dir}: cannot create folder ({exc.strerror})") from None
    return out_dir


def _previous(path: Path) -> Results | None:
    """An earlier run's results to merge into; a corrupt file is never overwritten."""
    if not path.exists():
        return None
    try:
        return load(path)
    except ResultsError as exc:
        raise UsageError(f"{exc.one_line()}; not overwriting it: move it away or choose "
                         "another --out") from None


def _check_same_machine(previous: Results, environment: dict[str, Any], path: Path) -> None:
    old = (previous.environment.get("hostname"), previous.environment.get("gpu_name"))
    new = (environment.get("hostname"), environment.get("gpu_name"))
    if old != new:
        raise UsageError(f"holds results of another machine (host {old[0]}, GPU {old[1]}; "
                         f"this is host {new[0]}, GPU {new[1]}); choose another --out",
                         file=str(path))


def _write(path: Path, environment: dict[str, Any], options: dict[str, Any],
           previous: Results | None, done: list[CaseResult]) -> Results:
    """Merge ``done`` into ``previous`` (same key: replaced in place) and write atomically."""
    now = {case.key: case for case in done}
    before = [now.pop(case.key, case) for case in previous.cases] if previous else []
    order = {key: i for i, key in enumerate(keys())}  # registry order; others as they came
    cases = sorted([*before, *now.values()], key=lambda c: order.get(c.key, len(order)))
    results = Results(environment, tuple(cases), options, str(path))
    try:
        write_atomic(path, dumps(results))
    except OSError as exc:
        raise UsageError(f"cannot write ({exc.strerror})", file=str(path)) from None
    return results


class _Interrupted(Exception):
    def __init__(self, result: CaseResult) -> None:
        super().__init__("interrupted")
        self.result = result


def run_case(case: Case, script: Path, cmd: list[str], env: dict[str, str], out_dir: Path,
             limit_s: float) -> CaseResult:
    """Run ``cmd`` (the case's ``script``); raises _Interrupted (holding the result) on Ctrl-C."""
    raw = out_dir / "raw" / f"{case.key}.jsonl"
    log = out_dir / "logs" / f"{case.key}.log"
    if not script.is_file():
        return CaseResult(case.key, case.description, case.gpus, "failed",
                          error=f"{script}: no such script", command=tuple(cmd))
    raw.unlink(missing_ok=True)
    status, error, interrupted = "ok", None, False
    start = time.monotonic()
    try:
        code = run_in_group(cmd, log, env, limit_s)
    except KeyboardInterrupt:
        status, error, interrupted = "failed", "interrupted", True
    else:
        if code is None:
            status, error = "timeout", f"timed out after {limit_s:g} s; process group killed"
            tail = error_tail(read_tail(log))
            error += f"; last output: {tail}" if tail else ""
        elif code != 0:
            status = "failed"
            tail = error_tail(read_tail(log))
            error = f"{exit_text(code)}: {tail}" if tail else exit_text(code)
    elapsed_s = time.monotonic() - start
    measurements, data, bad = read_raw(raw, f"raw/{raw.name}")
    if bad is not None:
        error = bad if status == "ok" else f"{error}; {bad}"
        status = "failed" if status == "ok" else status
    result = CaseResult(case.key, case.description, case.gpus, status, tuple(measurements),
                        error, round(elapsed_s, 3), tuple(cmd), data)
    if interrupted:
        raise _Interrupted(result)
    return result


def read_raw(path: Path, name: str) -> tuple[list[Measurement], dict[str, Any], str | None]:
    """(measurements, data, error) from a case's JSON lines. A last line cut short by a crash
    is skipped; any other bad line is an error (the good lines are kept)."""
    if not path.exists():
        return [], {}, None
    try:
        text = read_text(path)
    except PkbsimError as exc:
        return [], {}, exc.one_line()
    measurements: list[Measurement] = []
    data: dict[str, Any] = {}
    errors: list[str] = []
    rows = text.split("\n")
    for number, row in enumerate(rows, 1):
        if not row.strip():
            continue
        try:
            obj = loads_json(row)
        except PkbsimError as exc:
            if number < len(rows):  # a complete line (the last one may be cut short)
                errors.append(f"{name} line {number}: {exc.message}")
            continue
        try:
            if not isinstance(obj, dict) or len(obj) != 1 or \
                    not {"measurement", "data"} & obj.keys():
                raise ValueError('expected {"measurement": {...}} or {"data": {...}}')
            if "data" in obj:
                if not isinstance(obj["data"], dict):
                    raise ValueError("data: expected an object")
                data.update(obj["data"])
            else:
                measurements.append(parse_measurement(obj["measurement"]))
        except (ValueError, ResultsError) as exc:
            errors.append(f"{name} line {number}: {exc}")
    if not errors:
        return measurements, data, None
    more = f" (and {len(errors) - 1} more bad lines)" if len(errors) > 1 else ""
    return measurements, data, errors[0] + more


def parse_measurement(raw: Any) -> Measurement:
    """One measurement checked by the results schema; errors name ``measurement.FIELD``."""
    doc = {"schema": SCHEMA, "environment": {},
           "cases": [{"key": "line", "status": "ok", "gpus": 0, "measurements": [raw]}]}
    try:
        return parse(doc).cases[0].measurements[0]
    except ResultsError as exc:
        where = (exc.field or "").replace("cases[0].measurements[0]", "measurement")
        raise ValueError(f"{where}: {exc.message}") from None
