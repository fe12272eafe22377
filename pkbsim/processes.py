"""Child processes that must not outlive their job: each command under a guard in a session of
its own, its output in a log, a time limit after which its whole process tree is killed, and
nothing left behind when pkbsim itself dies (pkbsim.guard).

The validation runner, ``pkbsim run`` and the probes start every child through here; the
tracer's untrusted code runs through ``run_watched``.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import select
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from pkbsim import guard
from pkbsim.files import open_stream

# Multicast (NVLS) off: it can disrupt other jobs on a shared node.
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                "NVSHMEM_DISABLE_NVLS": "1"}
KILL_GRACE_S = 10.0  # between SIGTERM and SIGKILL of a case's process group
ERROR_LINES = 3  # last log lines that become a failed child's error
ERROR_CHARS = 400
JOB_ENV = "PKBSIM_JOB"  # a token every process of a watched job inherits (run_watched)
POLL_S = 0.2  # how often run_watched asks for its deadline
CHUNK_BYTES = 65536
LOG_TAIL_BYTES = 65536  # a capped log keeps its last bytes (where the error is)
DRAIN_S = 2.0  # output still read after a watched job ended


def run_in_group(cmd: list[str], log: Path, env: dict[str, str], timeout_s: float
                 ) -> int | None:
    """Run ``cmd`` under a guard (pkbsim.guard) in a session of its own, its output in ``log``
    after a ``$ cmd`` line. The exit code, or None when it ran past ``timeout_s`` (its process
    tree killed). On Ctrl-C the tree is stopped and KeyboardInterrupt re-raised; leftovers of a
    finished run are stopped by the guard (they must not hold a GPU); if pkbsim dies, even by
    SIGKILL, the guard kills the tree."""
    with open_stream(log) as handle:
        handle.write(f"$ {shlex.join(cmd)}\n".encode())
        handle.flush()
        proc = subprocess.Popen(guarded(cmd), stdout=handle, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        try:
            code = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            stop_group(proc, KILL_GRACE_S)
            return None
        except KeyboardInterrupt:
            stop_group(proc, KILL_GRACE_S)
            raise
    return code


def run_watched(cmd: list[str], log: Path, env: dict[str, str], deadline: Callable[[], float],
                log_bytes: int, grace_s: float = KILL_GRACE_S) -> int | None:
    """``cmd`` under a guard in a session of its own, as ``run_in_group``, for code that may be
    hostile or stuck. The time limit is enforced here, outside the processes it limits:
    ``deadline()`` (a ``time.monotonic()`` value, which may move as the job progresses) is asked
    every POLL_S, and past it the whole tree is stopped (SIGTERM, SIGKILL after ``grace_s``)
    and None returned. The output reaches ``log`` through this process, at most ``log_bytes``
    of it (CappedLog). However the guard ends, even killed by the code it guards, its process
    group and every process still carrying the job's token in its environment are killed."""
    token = secrets.token_hex(16)
    with open_stream(log) as handle:
        handle.write(f"$ {shlex.join(cmd)}\n".encode())
        handle.flush()
        capped = CappedLog(handle, log_bytes)
        proc = subprocess.Popen(guarded(cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env={**env, JOB_ENV: token},
                                start_new_session=True)
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        try:
            code = _watch(proc, fd, capped, deadline, grace_s)
        except BaseException:
            stop_group(proc, grace_s)
            raise
        finally:
            kill_leftovers(proc.pid, token)
            _drain(fd, capped, DRAIN_S)
            capped.close()
            proc.stdout.close()
    return code


def _watch(proc: subprocess.Popen[bytes], fd: int, capped: CappedLog,
           deadline: Callable[[], float], grace_s: float) -> int | None:
    reading = True
    next_check = 0.0
    while True:
        if reading:
            ready, _, _ = select.select([fd], [], [], POLL_S)
            if ready:
                chunk = os.read(fd, CHUNK_BYTES)
                reading = bool(chunk)
                capped.add(chunk)
        else:  # the output is closed: wait for the guard alone
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=POLL_S)
        code = proc.poll()
        if code is not None:
            return code
        now = time.monotonic()
        if now >= next_check:
            next_check = now + POLL_S
            if now > deadline():
                stop_group(proc, grace_s)
                return None


def _drain(fd: int, capped: CappedLog, seconds: float) -> None:
    """What is left in the pipe, for at most ``seconds`` (a process that escaped every kill may
    hold its end open)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], max(0.0, end - time.monotonic()))
        if not ready:
            return
        chunk = os.read(fd, CHUNK_BYTES)
        if not chunk:
            return
        capped.add(chunk)


class CappedLog:
    """A child's output into ``handle``, at most about ``limit`` bytes: the first ones, then a
    line saying how many were left out, then the last LOG_TAIL_BYTES (where an error is)."""

    def __init__(self, handle: IO[bytes], limit: int, tail: int = LOG_TAIL_BYTES) -> None:
        self.handle = handle
        self.tail_max = min(tail, limit)
        self.head_left = limit - self.tail_max
        self.head = self.head_left
        self.tail = bytearray()
        self.left_out = 0

    def add(self, chunk: bytes) -> None:
        if self.head_left:
            part = chunk[:self.head_left]
            self.handle.write(part)
            self.handle.flush()
            self.head_left -= len(part)
            chunk = chunk[len(part):]
        if chunk:
            self.tail += chunk
            extra = len(self.tail) - self.tail_max
            if extra > 0:
                del self.tail[:extra]
                self.left_out += extra

    def close(self) -> None:
        if self.left_out:
            self.handle.write(f"\n[pkbsim: {self.left_out:,} bytes of output left out here; "
                              f"the log keeps the first {self.head:,} and the last "
                              f"{self.tail_max:,}]\n".encode())
        self.handle.write(bytes(self.tail))
        self.tail.clear()
        self.handle.flush()


def kill_leftovers(group: int, token: str) -> None:
    """SIGKILL the process group ``group`` and every process whose environment carries
    ``JOB_ENV=token`` (one that left the group and lost its guard); /proc is read where there
    is one."""
    guard.signal_group(group, signal.SIGKILL)
    mark = f"{JOB_ENV}={token}".encode()
    proc_dir = Path("/proc")
    for entry in proc_dir.iterdir() if proc_dir.is_dir() else ():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:  # gone, or another user's
            continue
        if mark in environ.split(b"\0"):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(entry.name), signal.SIGKILL)


def guarded(cmd: list[str]) -> list[str]:
    """``cmd`` run by the guard script, which dies with this process and takes the tree along."""
    return [sys.executable, str(Path(guard.__file__)), str(os.getpid()), f"{KILL_GRACE_S:g}",
            "--", *cmd]


def run_short(cmd: list[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    """A short Python script's exit code and output (environment and topology probes): no GPU
    multicast, killed when it runs past ``timeout_s`` (TimeoutExpired) or when pkbsim dies."""
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False,
                          stdin=subprocess.DEVNULL, env={**os.environ, **NO_MULTICAST},
                          preexec_fn=guard.die_with_parent)


def exit_text(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit {code}"


def stop_group(proc: subprocess.Popen[Any], grace_s: float) -> None:
    """SIGTERM ``proc``, its process group and every descendant with its group (torchrun starts
    each worker in a session of its own), SIGKILL whatever is left after ``grace_s``."""
    guard.signal_group(proc.pid, signal.SIGTERM)
    guard.kill_tree(proc.pid, grace_s)
    guard.signal_group(proc.pid, signal.SIGKILL)
    proc.wait()


def read_tail(path: Path, max_bytes: int = 65536) -> str:
    with open(path, "rb") as handle:
        handle.seek(0, os.SEEK_END)
        handle.seek(max(0, handle.tell() - max_bytes))
        return handle.read().decode(errors="replace")


def error_tail(text: str, lines: int = ERROR_LINES, max_chars: int = ERROR_CHARS) -> str:
    """The last lines of a child's output as one line. torchrun's own failure report (its
    traceback and ChildFailedError box, which only say which rank failed) is left out."""
    rows = text.splitlines()
    marker = next((i for i, row in enumerate(rows) if "ChildFailedError" in row), None)
    if marker is not None:
        tracebacks = [i for i in range(marker) if rows[i].startswith("Traceback (most recent")]
        rows = rows[:tracebacks[-1] if tracebacks else marker]
    rows = [row.strip() for row in rows if row.strip() and not row.startswith("$ ")
            and "torch.distributed.elastic" not in row]
    out = " | ".join(rows[-lines:])
    return out if len(out) <= max_chars else "..." + out[-(max_chars - 3):]
