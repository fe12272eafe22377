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


class Done:
    """A CliResult read like a finished process (the launcher and folder run in this
    process, so coverage sees them; the traced code still runs in the worker's child)."""

    def __init__(self, result: object) -> None:
        self.returncode = result.code  # type: ignore[attr-defined]
        self.stdout = result.out  # type: ignore[attr-defined]
        self.stderr = result.err  # type: ignore[attr-defined]


@pytest.mark.parametrize("mode", ["real", "fake"])
def test_a_function_is_traced_at_two_ranks(cli, tmp_path: Path, mode: str) -> None:
    done = Done(cli("trace", f"{FN}:step", "-w", "2", "--set", "m=64", "--mode", mode,
                  "--out", str(tmp_path)))
    if mode == "fake":  # .item() reads a value fake tensors do not have
        assert done.returncode == 1 and "DataDependentOutputException" in done.stdout
        return
    assert done.returncode == 0, done.stdout + done.stderr
    traced = json.loads((tmp_path / "user_fn.step.json").read_text())
    assert traced["meta"]["mode"] == "real"  # as --mode names it (it said "cpu")
    ops = traced["ops"]
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


def test_a_crashing_and_a_hanging_function_are_reported(cli, tmp_path: Path) -> None:
    done = Done(cli("trace", f"{FN}:crash", "--mode", "real", "--out", str(tmp_path)))
    assert done.returncode == 1
    assert "ValueError: this candidate is broken" in done.stdout
    done = Done(cli("trace", f"{FN}:hang", "--mode", "real", "--timeout", "3",
                    "--out", str(tmp_path / "h")))
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


def test_pkb_references_fold_into_reference_programs(cli, tmp_path: Path) -> None:
    """--pkb-root with --task all traces every reference of the checkout; --programs folds
    the traces into <task>.json files the simulator reads (problem 1 of the tiny checkout is
    named like PKB's problem 1, so it lands in 1_allreduce.json)."""
    done = Done(cli("trace", "--pkb-root", str(DATA / "pkb_tiny"), "--task", "all", "-w", "2",
                    "--set", "M=256", "--set", "N=64", "--out", str(tmp_path / "t"),
                    "--programs", str(tmp_path / "p")))
    again = Done(cli("trace", "--pkb-root", str(DATA / "pkb_tiny"), "--task", "1", "-w", "1",
                     "--mode", "real", "--out", str(tmp_path / "t1"),
                     "--programs", str(tmp_path / "p")))
    assert again.returncode == 0, again.stdout + again.stderr
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1_tiny_allreduce: ok" in done.stdout
    data = json.loads((tmp_path / "p" / "1_allreduce.json").read_text())
    assert [p["world_size"] for p in data["points"]] == [1, 2]  # merged, sorted
    point = data["points"][1]
    assert point["world_size"] == 2 and point["set"] == {"M": 256.0, "N": 64.0}
    assert point["provenance"]["rows"] == 256
    assert point["segments"][0]["end"] == "collective"


def test_another_rank_is_recorded(cli, tmp_path: Path) -> None:
    """--rank -1: the last rank (fake tensors stand for it); its rank is kept in the
    programs' provenance."""
    done = Done(cli("trace", "--pkb-root", str(DATA / "pkb_tiny"), "--task", "1", "-w", "4",
                    "--rank", "-1", "--mode", "fake", "--out", str(tmp_path / "t"),
                    "--programs", str(tmp_path / "p")))
    assert done.returncode == 0, done.stdout + done.stderr
    meta = json.loads((tmp_path / "t" / "1_tiny_allreduce.json").read_text())["meta"]
    assert meta["rank"] == 3 and meta["world_size"] == 4 and meta["mode"] == "fake"
    data = json.loads((tmp_path / "p" / "1_allreduce.json").read_text())
    assert data["points"][0]["provenance"]["rank"] == 3


def test_bad_options_are_usage_errors(cli, tmp_path: Path) -> None:
    for args in (("trace",), ("trace", f"{FN}:step", "--pkb-root", str(tmp_path)),
                 ("trace", f"{FN}:step", "--mode", "quantum"),
                 ("trace", "--pkb-root", str(DATA / "pkb_tiny")),
                 ("trace", "--pkb-root", str(DATA / "pkb_tiny"), "--task", "1", "--set", "X=1"),
                 ("trace", "--pkb-root", str(DATA / "pkb_tiny"), "--task", "13"),
                 ("trace", f"{FN}:step", "-w", "100000"),
                 ("trace", f"{FN}:step", "-w", "4", "--rank", "4"),
                 ("trace", f"{FN}:step", "-w", "4", "--rank", "-5")):
        r = cli(*args)
        assert r.code == 2, (args, r.out, r.err)
        assert len(r.err.strip().splitlines()) == 1, (args, r.err)
