"""Child processes that must not outlive their job: each command in a session of its own,
its output in a log, a time limit after which its whole process tree is killed.

The validation runner, ``pkbsim run`` and the probes start every child through here.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from pkbsim.files import open_stream

# Multicast (NVLS) off: it can disrupt other jobs on a shared node.
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                "NVSHMEM_DISABLE_NVLS": "1"}
KILL_GRACE_S = 10.0  # between SIGTERM and SIGKILL of a case's process group
ERROR_LINES = 3  # last log lines that become a failed child's error
ERROR_CHARS = 400


def run_in_group(cmd: list[str], log: Path, env: dict[str, str], timeout_s: float
                 ) -> int | None:
    """Run ``cmd`` in a session of its own, its output in ``log`` after a ``$ cmd`` line. The
    exit code, or None when it ran past ``timeout_s`` (its process groups killed). On Ctrl-C
    the groups are stopped and KeyboardInterrupt re-raised; leftovers of a finished run are
    stopped too (they must not hold a GPU)."""
    with open_stream(log) as handle:
        handle.write(f"$ {shlex.join(cmd)}\n".encode())
        handle.flush()
        proc = subprocess.Popen(cmd, stdout=handle, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        try:
            code = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            stop_group(proc, KILL_GRACE_S)
            return None
        except KeyboardInterrupt:
            stop_group(proc, KILL_GRACE_S)
            raise
    if _group_alive(proc.pid):
        stop_group(proc, 2.0)
    return code


def exit_text(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit {code}"


def stop_group(proc: subprocess.Popen[Any], grace_s: float) -> None:
    """SIGTERM the process group of ``proc`` and of each of its descendants (torchrun starts
    each worker in a session of its own), SIGKILL whatever is left after ``grace_s``."""
    tree = _descendants(proc.pid)
    groups = ({proc.pid} | {pgrp for _, pgrp in tree}) - {os.getpgrp()}
    for group in groups:
        _signal_group(group, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if proc.poll() is not None and not any(_alive(pid) for pid, _ in tree):
            break
        time.sleep(0.05)
    for group in groups:
        _signal_group(group, signal.SIGKILL)
    for pid, _ in tree:  # any that left its group
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    proc.wait()


def _descendants(pid: int) -> list[tuple[int, int]]:
    """(pid, process group) of every descendant of ``pid``; empty where /proc is missing."""
    children: dict[int, list[tuple[int, int]]] = {}
    proc_dir = Path("/proc")
    for entry in proc_dir.iterdir() if proc_dir.is_dir() else ():
        if not entry.name.isdigit():
            continue
        stat = _stat(int(entry.name))
        if stat:
            children.setdefault(int(stat[1]), []).append((int(entry.name), int(stat[2])))
    found: list[tuple[int, int]] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child[0])
    return found


def _stat(pid: int) -> list[str]:
    """/proc/PID/stat after the command name: state, ppid, pgrp, ...; [] when gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return []
    return text.rsplit(")", 1)[1].split()


def _alive(pid: int) -> bool:
    """Running (a zombie is not)."""
    if Path("/proc").is_dir():
        stat = _stat(pid)
        return bool(stat) and stat[0] not in ("Z", "X")
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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
