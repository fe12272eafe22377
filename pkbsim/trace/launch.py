"""Start the tracer's ranks in a child process (pkbsim.trace.worker) and collect the traces.

The traced code (a PKB reference, a user's function) is untrusted: it runs only in the child,
under a guard, with a time limit that this process enforces (pkbsim.processes.run_watched: a
target that holds the interpreter lock cannot stop it), its output capped, nothing of it left
running. A target that fails is recorded and the job restarts after it, so one broken
reference does not cost the others. The child's status files are read bounded and checked.
"""

from __future__ import annotations

import importlib.util
import math
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

from pkbsim.errors import PkbsimError, UsageError
from pkbsim.inputs import loads_json, path_kind, read_bytes
from pkbsim.limits import CPU_RANKS, RANK_FILE_BYTES, TRACE_LOG_BYTES
from pkbsim.processes import error_tail, exit_text, read_tail, run_watched

STARTUP_S = 60.0  # for the job to start its first target: importing torch, gloo's rendezvous
KILL_GRACE_S = 2.0  # CPU processes: nothing to clean up on a device
STATES = ("running", "ok", "error")
ERROR_CHARS = 400
TORCH_HINT = ("pkbsim trace needs PyTorch (its CPU build is enough), which is not installed: "
              "pip install torch --index-url https://download.pytorch.org/whl/cpu")


@dataclass(frozen=True)
class TraceJob:
    """What to trace: PKB references (``pkb_root`` and ``problems``) or one function."""

    world_size: int
    out_dir: Path
    pkb_root: Path | None = None
    problems: tuple[int, ...] = ()  # () with a pkb_root: every reference
    rows: int = 1024
    cols: int = 1024
    pkb_commit: str = ""
    function: str = ""  # FILE.py:NAME
    inputs: str = "make_inputs"
    sets: tuple[str, ...] = ()  # KEY=VALUE for the inputs function
    timeout_s: float = 300.0  # per target
    no_grad: bool = False
    mode: str = "auto"  # fake | real | auto (fake, then real for the targets fake cannot run)
    rank: int = 0  # the rank recorded
    env: tuple[tuple[str, str], ...] = ()  # set in the child (PKB_ROOT for a function's file)


@dataclass(frozen=True)
class TraceOutcome:
    target: str
    status: str  # ok | error
    error: str = ""
    seconds: float = 0.0
    path: Path | None = None
    timed_out: bool = False  # stopped at its time limit


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _command(job: TraceJob, problems: tuple[int, ...], fake: bool) -> list[str]:
    cmd = [sys.executable, "-m", "pkbsim.trace.worker", "--world-size", str(job.world_size),
           "--rank", str(job.rank),
           "--port", str(free_port()), "--out-dir", str(job.out_dir),
           "--timeout-s", f"{job.timeout_s:g}"]
    if job.no_grad:
        cmd.append("--no-grad")
    if fake:
        cmd.append("--fake")
    if job.pkb_root is not None:
        cmd += ["--pkb-root", str(job.pkb_root), "--problems", ",".join(map(str, problems)),
                "--rows", str(job.rows), "--cols", str(job.cols)]
        if job.pkb_commit:
            cmd += ["--pkb-commit", job.pkb_commit]
    else:
        cmd += ["--function", job.function, "--inputs", job.inputs]
        for item in job.sets:
            cmd += ["--set", item]
    return cmd


@dataclass(frozen=True)
class Status:
    """One rank's ``status/<target>.<rank>.json``, as the worker writes it."""

    state: str  # running | ok | error
    seconds: float = 0.0
    error: str = ""


def read_status(path: Path, target: str) -> Status | None:
    """The status in ``path`` (None where there is none); the traced code may have written
    over it, so it is read up to RANK_FILE_BYTES and checked: a PkbsimError naming the file and
    field where it is not what the worker writes."""
    if not path.exists():
        return None
    data = loads_json(read_bytes(path, limit=RANK_FILE_BYTES), file=str(path))

    def bad(field: str, why: str) -> PkbsimError:
        return UsageError(f"not a status the tracer writes: {why}", file=str(path),
                          field=field)

    if not isinstance(data, dict):
        raise bad("(top level)", "expected a JSON object")
    if data.get("target") != target:
        raise bad("target", f"expected {target!r}, got {str(data.get('target'))[:80]!r}")
    state = data.get("status")
    if state not in STATES:
        raise bad("status", f"expected one of {', '.join(STATES)}, got {str(state)[:80]!r}")
    if state == "running":
        return Status(state)
    seconds = data.get("seconds")
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not (
            math.isfinite(seconds) and seconds >= 0):
        raise bad("seconds", f"expected a number of seconds, got {str(seconds)[:80]!r}")
    error = data.get("error", "")
    if state == "error" and not (isinstance(error, str) and error):
        raise bad("error", "expected the error's text")
    text = " ".join(str(error).split())
    return Status(state, float(seconds), text if len(text) <= ERROR_CHARS
                  else text[:ERROR_CHARS - 3] + "...")


def _statuses(job: TraceJob, name: str, fake: bool) -> list[Status]:
    """The target's statuses of every rank that runs (the recorded one's first); a malformed
    one raises (read_status)."""
    ranks = [job.rank] if fake else [job.rank] + [r for r in range(job.world_size)
                                                  if r != job.rank]
    found = (read_status(job.out_dir / "status" / f"{name}.{r}.json", name) for r in ranks)
    return [status for status in found if status is not None]


def _finished(statuses: list[Status]) -> bool:
    """The recorded rank (the first) has its ok, or a rank failed."""
    return bool(statuses) and (statuses[0].state == "ok" or any(
        s.state == "error" for s in statuses))


class Clock:
    """When a tracing job must be stopped: STARTUP_S after its start until its first target
    starts, then each target's time limit from when this process sees it start (its running
    status, or the end of the target before it). Asked by run_watched as the job runs."""

    def __init__(self, job: TraceJob, names: list[str], fake: bool) -> None:
        self.job, self.names, self.fake = job, names, fake
        self.started = time.monotonic()
        self.index = 0  # the target running, or next
        self.since: float | None = None  # when that target was seen starting

    def __call__(self) -> float:
        now = time.monotonic()
        while self.index < len(self.names):
            try:
                statuses = _statuses(self.job, self.names[self.index], self.fake)
            except PkbsimError:  # reported when the job has ended
                statuses = []
            if _finished(statuses):
                self.index += 1
                self.since = now
                continue
            if self.since is None and statuses:
                self.since = now
            break
        if self.since is None:
            return self.started + STARTUP_S
        return self.since + self.job.timeout_s

    def why(self) -> str:
        if self.since is None:
            return f"the tracing job did not start its first target in {STARTUP_S:g} s"
        return f"ran past its time limit ({self.job.timeout_s:g} s)"


def _own_statuses(out_dir: Path, names: list[str]) -> list[Path]:
    """The status files these targets' ranks write (``<target>.<rank>.json``, any rank): the
    only ones a run may remove; any other file in ``status/`` is not pkbsim's to delete."""
    folder = out_dir / "status"
    if not folder.is_dir():
        return []
    wanted = set(names)
    own = []
    for path in folder.glob("*.json"):
        target, _, rank = path.name.removesuffix(".json").rpartition(".")
        if target in wanted and rank.isdigit() and path.is_file():
            own.append(path)
    return own


def _targets(job: TraceJob) -> list[tuple[int, str]]:
    """(problem id, target name) in the order the worker runs them."""
    if job.pkb_root is None:
        file, _, name = job.function.rpartition(":")
        return [(0, f"{Path(file).stem}.{name}")]
    wanted = set(job.problems)
    out = []
    for path in (job.pkb_root / "reference").glob("*.py"):
        head = path.stem.split("_", 1)[0]
        if head.isdigit() and (not wanted or int(head) in wanted):
            out.append((int(head), path.stem))
    return sorted(out)


def check_job(job: TraceJob) -> None:
    check_out_folder(job.out_dir, "--out")
    if importlib.util.find_spec("torch") is None:  # the worker runs this interpreter
        raise UsageError(TORCH_HINT)
    if job.mode != "fake":  # fake tensors: one process stands for the traced rank
        CPU_RANKS.check(job.world_size, "tracing ranks (processes on this machine)")
    if not 0 <= job.rank < job.world_size:
        raise UsageError(f"rank {job.rank} is not one of the {job.world_size} ranks",
                         field="--rank")
    if job.pkb_root is not None:
        if path_kind(job.pkb_root / "reference", name=f"--pkb-root {job.pkb_root}") != "folder" \
                or path_kind(job.pkb_root / "utils" / "input_output_tensors.py") != "file":
            raise UsageError("not a ParallelKernelBench checkout (needs reference/ and "
                             "utils/input_output_tensors.py)", field="--pkb-root",
                             file=str(job.pkb_root))
        missing = set(job.problems) - {pid for pid, _ in _targets(job)}
        if missing:
            raise UsageError(f"no reference for problem(s) {', '.join(map(str, sorted(missing)))}"
                             f" in {job.pkb_root / 'reference'}", field="--task")
        return
    file, sep, name = job.function.rpartition(":")
    if not sep or not file or not name.isidentifier():
        raise UsageError(f"expected FILE.py:FUNCTION, got {job.function!r}", field="TARGET")
    kind = path_kind(file)
    if kind != "file":
        raise UsageError("no such file" if kind == "missing" else "not a regular file", file=file)


def check_out_folder(folder: Path, option: str) -> None:
    """``folder`` must be a folder or a new path (made with its parents) whose nearest existing
    parent is a folder: never a file, a FIFO or a device, which would fail after the work."""
    where = f"{option} {folder}"
    kind = path_kind(folder, name=where)
    if kind in ("file", "other"):
        what = "a regular file" if kind == "file" else "a FIFO, device or socket"
        raise UsageError(f"{where}: not a folder (it is {what}); give a folder, existing or new")
    if kind == "missing" and os.path.lexists(folder):
        raise UsageError(f"{where}: a symbolic link to nothing; give a folder, existing or new")
    if kind == "missing":
        for parent in folder.absolute().parents:  # the nearest that exists must be a folder
            found = path_kind(parent, name=where)
            if found == "folder":
                break
            if found != "missing":
                raise UsageError(f"{where}: {parent} is not a folder")


MODES = ("auto", "fake", "real")


def checkout_commit(root: Path) -> str:
    """A checkout's commit, when it is the top of a git work tree (else the empty string: a
    copy inside another repository must not take that repository's commit)."""
    try:
        done = subprocess.run(["git", "-C", str(root), "rev-parse", "--show-toplevel",
                               "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    lines = done.stdout.split()
    if done.returncode != 0 or len(lines) != 2 or Path(lines[0]).resolve() != root.resolve():
        return ""
    return lines[1]


def run_trace(job: TraceJob) -> list[TraceOutcome]:
    """Trace every target of ``job``; the outcome of each, in order. A target that fails (or a
    job that dies in one) is an ``error`` outcome; the job then restarts after it. In ``auto``
    mode a target that fake tensors cannot run (it reads values: ``.item()``, ``nonzero``) is
    traced again with real CPU tensors on W gloo ranks; one that ran past its time limit is
    not (real tensors do the same work and more)."""
    check_job(job)
    targets = _targets(job)
    if job.mode == "real":
        outcomes = _run_mode(job, targets, fake=False)
    else:
        outcomes = _run_mode(job, targets, fake=True)
        for name, outcome in list(outcomes.items()):
            if job.mode == "auto" and outcome.timed_out:
                outcomes[name] = replace(outcome, error=f"fake tensors: {outcome.error}; real "
                                         "tensors not tried (the same work, and more)")
        again = [(pid, name) for pid, name in targets
                 if outcomes[name].status != "ok" and not outcomes[name].timed_out]
        if job.mode == "auto" and again and job.world_size > CPU_RANKS.value:
            for _, name in again:  # real tensors need one process per rank
                outcomes[name] = replace(outcomes[name], error=(
                    f"fake tensors: {outcomes[name].error}; real tensors: "
                    f"{CPU_RANKS.exceeded(job.world_size, 'tracing ranks').one_line()}"))
        elif job.mode == "auto" and again:
            for name, outcome in _run_mode(job, again, fake=False).items():
                first = outcomes[name]
                outcomes[name] = outcome if outcome.status == "ok" else TraceOutcome(
                    name, "error", f"fake tensors: {first.error}; real tensors: "
                    f"{outcome.error}", outcome.seconds)
    return [outcomes[name] for _, name in targets]


def _run_mode(job: TraceJob, targets: list[tuple[int, str]], fake: bool
              ) -> dict[str, TraceOutcome]:
    job.out_dir.mkdir(parents=True, exist_ok=True)
    for old in _own_statuses(job.out_dir, [name for _, name in targets]):  # a previous run's
        old.unlink()
    outcomes: dict[str, TraceOutcome] = {}
    pending = list(targets)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", **dict(job.env)}
    attempt = 0
    while pending:
        attempt += 1
        log = job.out_dir / f"worker_{'fake' if fake else 'real'}_{attempt}.log"
        started = time.monotonic()
        clock = Clock(job, [name for _, name in pending], fake)
        code = run_watched(_command(job, tuple(pid for pid, _ in pending), fake), log, env,
                           clock, TRACE_LOG_BYTES.value, KILL_GRACE_S)
        rest = []
        failed_here = False
        for pid, name in pending:
            try:
                statuses = _statuses(job, name, fake)
            except PkbsimError as exc:
                outcomes[name] = TraceOutcome(name, "error", f"status file {exc.one_line()}",
                                              round(time.monotonic() - started, 3))
                failed_here = True
                continue
            errors = [s for s in statuses if s.state == "error"]
            if errors:
                outcomes[name] = TraceOutcome(name, "error", errors[0].error, errors[0].seconds)
                failed_here = True
            elif statuses and statuses[0].state == "ok" and (
                    job.out_dir / f"{name}.json").is_file():
                outcomes[name] = TraceOutcome(name, "ok", seconds=statuses[0].seconds,
                                              path=job.out_dir / f"{name}.json")
            elif failed_here:
                rest.append((pid, name))
            else:  # the job died (or ran out of time) in this target: it is the cause
                why = (clock.why() if code is None else
                       f"the tracing job ended ({exit_text(code)}): "
                       f"{error_tail(read_tail(log))}")
                outcomes[name] = TraceOutcome(name, "error", why,
                                              round(time.monotonic() - started, 3),
                                              timed_out=code is None)
                failed_here = True
        pending = rest
    return outcomes
