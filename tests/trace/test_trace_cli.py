"""``pkbsim trace`` end to end: a user's torch.distributed function traced on CPU (needs torch),
then simulated from the trace file; broken and hanging functions are contained."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from paths import DATA

pytest.importorskip("torch")
FN = DATA / "trace" / "user_fn.py"


def pkbsim(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pkbsim", *args], capture_output=True,
                          text=True, timeout=timeout, check=False)


@pytest.mark.parametrize("mode", ["real", "fake"])
def test_a_function_is_traced_at_two_ranks(tmp_path: Path, mode: str) -> None:
    done = pkbsim("trace", f"{FN}:step", "-w", "2", "--set", "m=64", "--mode", mode,
                  "--out", str(tmp_path))
    if mode == "fake":  # .item() reads a value fake tensors do not have
        assert done.returncode == 1 and "DataDependentOutputException" in done.stdout
        return
    assert done.returncode == 0, done.stdout + done.stderr
    ops = json.loads((tmp_path / "user_fn.step.json").read_text())["ops"]
    by_op = {o["op"]: o for o in ops}
    mm = by_op["aten.mm.default"]
    assert mm["class"] == "library" and mm["flops"] == 2 * 64 * 32 * 16
    coll = by_op["c10d.allreduce_.default"]["collective"]
    assert coll == {"name": "all_reduce", "group_size": 2, "bytes": 64 * 32 * 4,
                    "group_ranks": [0, 1]}
    assert by_op["aten._local_scalar_dense.default"]["class"] == "sync"
    assert by_op["aten.view.default"]["class"] == "view"
    sim = pkbsim("simulate", "--trace-file", str(tmp_path / "user_fn.step.json"),
                 "--topology", "gb200-nvl72", "-w", "8")
    assert sim.returncode == 0, sim.stderr
    assert "Reference model: traced (W = 2)" in sim.stdout


def test_a_crashing_and_a_hanging_function_are_reported(tmp_path: Path) -> None:
    done = pkbsim("trace", f"{FN}:crash", "--mode", "real", "--out", str(tmp_path))
    assert done.returncode == 1
    assert "ValueError: this candidate is broken" in done.stdout
    done = pkbsim("trace", f"{FN}:hang", "--mode", "real", "--timeout", "3",
                  "--out", str(tmp_path / "h"))
    assert done.returncode == 1 and "time limit" in done.stdout


def test_bad_targets_are_one_line_errors(tmp_path: Path) -> None:
    for args in (("trace", "nofile.py:f"), ("trace", f"{FN}"), ("trace", "--pkb-root",
                                                                 str(tmp_path), "--task", "1")):
        done = pkbsim(*args, timeout=60)
        assert done.returncode == 2, args
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "pkbsim-trace", "version": 1, "meta": {"world_size": 0}}')
    done = pkbsim("simulate", "--trace-file", str(bad), timeout=60)
    assert done.returncode == 2 and "meta.world_size" in done.stderr


def test_pkb_references_fold_into_reference_programs(tmp_path: Path) -> None:
    """--pkb-root with --task all traces every reference of the checkout; --programs folds
    the traces into <task>.json files the simulator reads (problem 1 of the tiny checkout is
    named like PKB's problem 1, so it lands in 1_allreduce.json)."""
    done = pkbsim("trace", "--pkb-root", str(DATA / "pkb_tiny"), "--task", "all", "-w", "2",
                  "--set", "M=256", "--set", "N=64", "--out", str(tmp_path / "t"),
                  "--programs", str(tmp_path / "p"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1_tiny_allreduce: ok" in done.stdout
    data = json.loads((tmp_path / "p" / "1_allreduce.json").read_text())
    point = data["points"][0]
    assert point["world_size"] == 2 and point["set"] == {"M": 256.0, "N": 64.0}
    assert point["provenance"]["rows"] == 256
    assert point["segments"][0]["end"] == "collective"
