"""Process hygiene: nothing pkbsim starts outlives it, even when pkbsim is killed with SIGKILL
and a child has started a grandchild in a session of its own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from paths import ROOT

from pkbsim.guard import alive, descendants, kill_tree
from pkbsim.guard import main as guard_main
from pkbsim.pkb.runner import visible_gpus
from pkbsim.processes import guarded

# The command pkbsim runs: it starts a grandchild in a new session, then both wait forever.
CHILD = textwrap.dedent("""
    import os, subprocess, sys, time
    folder = sys.argv[1]
    grand = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                             start_new_session=True)
    with open(os.path.join(folder, "pids.tmp"), "w") as f:
        f.write(f"{os.getpid()} {grand.pid}")
    os.replace(os.path.join(folder, "pids.tmp"), os.path.join(folder, "pids"))
    time.sleep(600)
""")

# pkbsim's side: run the command through the runner's own path, as validate and run do.
DRIVER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from pkbsim.processes import run_in_group
    folder = Path(sys.argv[1])
    run_in_group([sys.executable, str(folder / "child.py"), str(folder)], folder / "log",
                 {}, 600)
""")


def wait_for(predicate, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def test_sigkilled_parent_leaves_no_child_or_grandchild(tmp_path: Path) -> None:
    (tmp_path / "child.py").write_text(CHILD)
    (tmp_path / "driver.py").write_text(DRIVER)
    driver = subprocess.Popen([sys.executable, str(tmp_path / "driver.py"), str(tmp_path)],
                              cwd=ROOT, start_new_session=True)
    try:
        assert wait_for((tmp_path / "pids").exists, 30), (tmp_path / "log").read_text()
        child, grand = map(int, (tmp_path / "pids").read_text().split())
        below = [pid for pid, _ in descendants(driver.pid)]
        assert child in below and grand in below  # the guard kept the orphan in its tree
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait()
        assert wait_for(lambda: not alive(child) and not alive(grand), 20), \
            f"left behind: {[p for p in (child, grand) if alive(p)]}"
        assert wait_for(lambda: not any(alive(pid) for pid in below), 20)  # the guard too
    finally:
        if driver.poll() is None:
            driver.kill()
        for pid, _ in descendants(driver.pid):
            os.kill(pid, signal.SIGKILL)


def test_sigkilled_sweep_leaves_no_worker(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "pkbsim", "sweep", "--collective", "all_reduce", "--sizes",
           "1KiB:1GiB:x2", "--vary", "world_size=2,4,8,16", "--topology", "h100-ib-2node",
           "--metric", "custom_best", "--jobs", "2", "--out", str(tmp_path / "s.csv")]
    parent = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        assert wait_for(lambda: len(descendants(parent.pid)) >= 2, 60), "no workers started"
        workers = [pid for pid, _ in descendants(parent.pid)]
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        assert wait_for(lambda: not any(alive(pid) for pid in workers), 20), \
            f"workers left behind: {[p for p in workers if alive(p)]}"
    finally:
        if parent.poll() is None:
            parent.kill()


@pytest.mark.skipif(visible_gpus() != 0, reason="this machine shows NVIDIA GPUs")
def test_run_on_cuda_without_a_gpu_is_one_line(cli, tmp_path: Path) -> None:
    tiny = ROOT / "tests" / "data" / "pkb_tiny"
    r = cli("run", "--pkb-root", str(tiny), "--problem", "1", "--solution",
            str(tiny / "solutions" / "1_tiny_allreduce_ok.py"), "--out", str(tmp_path / "o"))
    assert r.code == 2 and r.err.count("\n") == 1 and "--device cuda" in r.err
    assert not (tmp_path / "o").exists()  # nothing started


def test_run_on_cpu_bounds_its_ranks(cli, tmp_path: Path) -> None:
    tiny = ROOT / "tests" / "data" / "pkb_tiny"
    r = cli("run", "--pkb-root", str(tiny), "--problem", "1", "--solution",
            str(tiny / "solutions" / "1_tiny_allreduce_ok.py"), "--out", str(tmp_path / "o"),
            "--device", "cpu", "-w", "1000")
    assert r.code == 2 and "over the limit of 64 ranks" in r.err
    assert "PKBSIM_MAX_CPU_RANKS" in r.err


def test_kill_tree_reaches_a_grandchild_in_its_own_session() -> None:
    code = ("import subprocess, sys, time\n"
            "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'],"
            " start_new_session=True)\n"
            "print(g.pid, flush=True)\n"
            "time.sleep(600)\n")
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        grand = int(parent.stdout.readline())
        assert [pid for pid, _ in descendants(parent.pid)] == [grand]
        kill_tree(parent.pid, 1.0)
        assert wait_for(lambda: not alive(grand), 10)
        assert alive(parent.pid)  # the root itself is the caller's to end
    finally:
        parent.kill()
        parent.wait()


def test_the_guard_refuses_a_bad_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert guard_main(["guard.py", "1"]) == 2
    assert "usage: guard.py PARENT_PID GRACE_S -- COMMAND" in capsys.readouterr().err


def test_the_guard_ends_as_its_command_did(tmp_path: Path) -> None:
    for code, expected in (("raise SystemExit(3)", 3), ("import os; os.kill(os.getpid(), 9)", -9)):
        done = subprocess.run(guarded([sys.executable, "-c", code]), timeout=60)
        assert done.returncode == expected
