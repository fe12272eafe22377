"""Child processes that must not outlive their job: each command under a guard in a session of
its own, its output in a log, a time limit after which its whole process tree is killed, and
nothing left behind when pkbsim itself dies (pkbsim.guard).

The validation runner, ``pkbsim run`` and the probes start every child through here.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from pkbsim import guard
from pkbsim.files import open_stream

# Multicast (NVLS) off: it can disrupt other jobs on a shared node.
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                "NVSHMEM_DISABLE_NVLS": "1"}
KILL_GRACE_S = 10.0  # between SIGTERM and SIGKILL of a case's process group
ERROR_LINES = 3  # last log lines that become a failed child's error
ERROR_CHARS = 400


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
