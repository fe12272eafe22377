"""A guard between pkbsim and a command it runs, so that nothing the command starts outlives
pkbsim, even when pkbsim itself is killed with SIGKILL.

    python guard.py PARENT_PID GRACE_S -- COMMAND...

The guard becomes a child subreaper (every orphan in the command's tree, even one that started a
session of its own, is re-parented to it) and asks the kernel for SIGTERM when PARENT_PID dies.
It runs the command, reaps what exits, and when the command ends, or when it is told to stop
(SIGTERM, SIGINT, SIGHUP) or its parent is gone, it signals every process below it (SIGTERM,
then SIGKILL after GRACE_S) and exits as the command did. Standard library only: it runs as a
script, outside the package, and pkbsim.processes imports its helpers.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
POLL_S = 0.05


def prctl(option: int, value: int) -> bool:
    """Linux's prctl; False where it is missing (the guard then polls its parent)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(option, value, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """In a child: get ``sig`` when the parent dies (a ``preexec_fn``, or a worker's
    initializer)."""
    parent = os.getppid()
    prctl(PR_SET_PDEATHSIG, sig)
    if os.getppid() != parent:  # it died before the request took effect
        os.kill(os.getpid(), sig)


def stat_fields(pid: int) -> list[str]:
    """/proc/PID/stat after the command name: state, ppid, pgrp, ...; [] when gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return []
    return text.rsplit(")", 1)[1].split()


def descendants(pid: int) -> list[tuple[int, int]]:
    """(pid, process group) of every descendant of ``pid``; empty where /proc is missing."""
    children: dict[int, list[tuple[int, int]]] = {}
    proc_dir = Path("/proc")
    for entry in proc_dir.iterdir() if proc_dir.is_dir() else ():
        if not entry.name.isdigit():
            continue
        fields = stat_fields(int(entry.name))
        if fields:
            children.setdefault(int(fields[1]), []).append((int(entry.name), int(fields[2])))
    found: list[tuple[int, int]] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child[0])
    return found


def alive(pid: int) -> bool:
    """Running (a zombie is not)."""
    if Path("/proc").is_dir():
        fields = stat_fields(pid)
        return bool(fields) and fields[0] not in ("Z", "X")
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def kill_tree(root: int, grace_s: float, *, reap: bool = False) -> None:
    """SIGTERM every process below ``root`` and each one's process group (but this process's
    own), SIGKILL whatever is left after ``grace_s``. ``reap``: collect exited children (the
    guard, a subreaper, must; a parent with other children of its own must not)."""
    spare = {os.getpgrp()}
    tree = descendants(root)
    groups = {pgrp for _, pgrp in tree} - spare
    for pid, _ in tree:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    for group in groups:
        signal_group(group, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(alive(pid) for pid, _ in tree):
        if reap:
            _reap()
        time.sleep(POLL_S)
    for group in groups:
        signal_group(group, signal.SIGKILL)
    for pid, _ in descendants(root) + tree:
        if alive(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    if reap:
        _reap()


def _reap() -> None:
    """Collect exited children (orphans re-parented to a subreaper among them)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


class _Stop(Exception):
    pass


def main(argv: list[str]) -> int:
    if len(argv) < 5 or argv[3] != "--":
        sys.stderr.write("usage: guard.py PARENT_PID GRACE_S -- COMMAND...\n")
        return 2
    parent, grace_s, command = int(argv[1]), float(argv[2]), argv[4:]
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    prctl(PR_SET_PDEATHSIG, signal.SIGTERM)

    def stop(signum: int, frame: object) -> None:
        raise _Stop

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, stop)
    me = os.getpid()
    try:
        if os.getppid() != parent:
            return 128 + signal.SIGTERM
        child = subprocess.Popen(command)
        while True:
            code = child.poll()
            if code is not None:
                break
            if os.getppid() != parent:  # no PDEATHSIG here: poll
                raise _Stop
            _reap()
            time.sleep(POLL_S)
    except _Stop:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        kill_tree(me, grace_s, reap=True)
        return 128 + signal.SIGTERM
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    kill_tree(me, min(grace_s, 2.0), reap=True)  # leftovers must not hold a GPU
    if code < 0:  # end as the command did: killed by the same signal
        if -code not in (signal.SIGKILL, signal.SIGSTOP):  # those two cannot be caught anyway
            signal.signal(-code, signal.SIG_DFL)
        os.kill(me, -code)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
