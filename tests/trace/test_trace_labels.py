"""What a trace calls itself (issue 30): a user's traced function is no PKB problem, so the
task made from it is named by what was traced, never "Task 1"; the recorded mode uses --mode's
words (fake, real), and files that said "cpu" still read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pkbsim.errors import PkbsimError
from pkbsim.trace.format import load_trace
from pkbsim.trace.store import load_points

OPS = [{"op": "aten.mm.default", "class": "library", "kind": "gemm", "kernels": 1,
        "read_bytes": 4096, "write_bytes": 2048, "flops": 65536},
       {"op": "c10d.allreduce_.default", "class": "collective",
        "collective": {"name": "all_reduce", "group_size": 2, "bytes": 2048}}]


def write_trace(path: Path, **meta: object) -> Path:
    path.write_text(json.dumps({"format": "pkbsim-trace", "version": 1,
                                "meta": {"world_size": 2, **meta}, "ops": OPS}))
    return path


def test_a_users_trace_is_labelled_by_its_function(cli, tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "my_step.step.json", target="my_step.step",
                        function="/home/me/work/my_step.py:step", mode="real")
    r = cli("simulate", "--trace-file", str(trace), "-w", "2")
    assert r.code == 0, r.err
    assert r.out.splitlines()[0].startswith("Traced my_step.py:step on dgx-h100, W = 2")
    assert "Task 1" not in r.out
    r = cli("simulate", "--trace-file", str(trace), "-w", "2", "--format", "json")
    task = json.loads(r.out)["task"]
    assert task["id"] is None and task["traced_from"] == "my_step.py:step"
    assert task["key"] == "my_step_step"
    r = cli("simulate", "--task", "1", "-w", "2")  # PKB's problem 1 keeps its id
    assert r.out.startswith("Task 1 allreduce")


def test_a_pkb_trace_is_labelled_by_its_target(cli, tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "t.json", target="1_tiny_allreduce", pkb_problem=1)
    r = cli("simulate", "--trace-file", str(trace), "-w", "2")
    assert r.out.startswith("Traced 1_tiny_allreduce on"), r.out + r.err


def test_the_recorded_mode_uses_the_options_words(tmp_path: Path) -> None:
    assert load_trace(write_trace(tmp_path / "a.json", mode="fake")).meta["mode"] == "fake"
    assert load_trace(write_trace(tmp_path / "b.json", mode="real")).meta["mode"] == "real"
    assert load_trace(write_trace(tmp_path / "c.json", mode="cpu")).meta["mode"] == "real"
    assert "mode" not in load_trace(write_trace(tmp_path / "d.json")).meta
    with pytest.raises(PkbsimError) as caught:
        load_trace(write_trace(tmp_path / "e.json", mode="gpu"))
    assert caught.value.field == "meta.mode" and "fake, real" in caught.value.message


def test_shipped_programs_that_say_cpu_read_as_real() -> None:
    """tasks/traces/ was folded when real mode was recorded as "cpu"."""
    modes = {p.provenance.get("mode") for p in load_points("51_moe_ep_narrow")}
    assert modes and modes <= {"fake", "real"} and "real" in modes
