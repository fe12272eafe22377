"""Targets that misbehave, for the tracer's guard tests (tests/trace/test_trace_guard.py): each
is called with make_inputs(rank, world_size)'s one tensor."""

import json
import os
import signal
import subprocess
import sys
import time

import torch

SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)"]


def make_inputs(rank, world_size):
    return (torch.ones(4),)


def out_dir():
    """The worker's --out-dir (where its status files are)."""
    return sys.argv[sys.argv.index("--out-dir") + 1]


def spin(x):
    """Pure C that holds the interpreter lock for minutes: no thread of this process runs."""
    return sum(range(10**11))


def gen(x):
    """A generator function: calling it runs none of this body."""
    yield x * 2


def kill_guard(x):
    """Start a child in this process group and one in a session of its own, say their process
    ids, then SIGKILL the process above this one (the guard) and wait."""
    same = subprocess.Popen(SLEEPER)
    away = subprocess.Popen(SLEEPER, start_new_session=True)
    folder = os.environ["PKBSIM_TEST_FOLDER"]
    with open(os.path.join(folder, "pids.tmp"), "w") as f:
        json.dump({"worker": os.getpid(), "same": same.pid, "away": away.pid}, f)
    os.replace(os.path.join(folder, "pids.tmp"), os.path.join(folder, "pids.json"))
    os.kill(os.getppid(), signal.SIGKILL)
    time.sleep(600)


def flood(x):
    """10 MB on standard output, then an error."""
    line = "x" * 999 + "\n"
    for _ in range(10_000):
        sys.stdout.write(line)
    raise ValueError("flooded, then failed")


def bad_status(x):
    """Write a status with a wrong type over its own, then end as a failing rank does."""
    folder = os.path.join(out_dir(), "status")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "hostile_fn.bad_status.0.json"), "w") as f:
        json.dump({"target": "hostile_fn.bad_status", "status": "error", "error": "e",
                   "seconds": "soon"}, f)
    os._exit(3)
