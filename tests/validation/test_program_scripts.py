"""The GPU scripts of the calibration from real programs, run on CPU where they can be:
validate/pkb_programs.py (PKB's harness in forked fresh processes, gloo) and
validate/kernel_kinds.py (its operators as the trace recorder describes them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from paths import ROOT

from pkbsim.validation.runner import parse_measurement, read_raw

TINY = ROOT / "tests" / "data" / "pkb_tiny"


@pytest.mark.slow
def test_pkb_programs_times_each_problem_in_a_fresh_process_twice(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    out = tmp_path / "raw.jsonl"
    cmd = [sys.executable, str(ROOT / "validate" / "pkb_programs.py"), "--case",
           "pkb.references", "--out", str(out), "--pkb-root", str(TINY), "--device", "cpu",
           "--sizes", "64x64,128x64", "--reps", "2", "--grpo-seqs", ""]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    ms, data, error = read_raw(out, out.name)
    assert error is None
    assert {(m.params["problem"], m.params["rows"], m.params["rep"]) for m in ms} == {
        ("1_tiny_allreduce", rows, rep) for rows in (64, 128) for rep in (0, 1)}
    for m in ms:
        assert m.op == "pkb_reference" and m.time_us > 0 and m.params["host_issue_us"] > 0
        assert m.size_bytes > 0 and m.params["input_groups"] >= 1  # the timed tensor
    pids = {json.loads(line)["data"].get("pid") for line in out.read_text().splitlines()
            if '"pid"' in line}
    assert pids == {data["pid"]}  # one parent; the children are forks of it


@pytest.mark.slow
def test_pkb_programs_reports_a_crashing_problem_and_goes_on(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    root = tmp_path / "pkb"
    (root / "reference").mkdir(parents=True)
    (root / "utils").mkdir()
    (root / "utils" / "input_output_tensors.py").write_text(
        (TINY / "utils" / "input_output_tensors.py").read_text())
    (root / "reference" / "1_tiny_allreduce.py").write_text(
        (TINY / "reference" / "1_tiny_allreduce.py").read_text())
    (root / "reference" / "2_boom.py").write_text(
        "def solution(*args):\n    raise ValueError('boom')\n")
    out = tmp_path / "raw.jsonl"
    cmd = [sys.executable, str(ROOT / "validate" / "pkb_programs.py"), "--case",
           "pkb.references", "--out", str(out), "--pkb-root", str(root), "--device", "cpu",
           "--sizes", "64x64", "--reps", "1", "--grpo-seqs", ""]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    ms, data, _ = read_raw(out, out.name)
    assert [m.params["problem"] for m in ms] == ["1_tiny_allreduce"]
    assert data["error op=pkb_reference problem=2_boom rep=0"] == "ValueError: boom"


def test_pkb_programs_without_a_checkout_is_one_line(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    cmd = [sys.executable, str(ROOT / "validate" / "pkb_programs.py"), "--case",
           "pkb.references", "--out", str(tmp_path / "x.jsonl"), "--pkb-root",
           str(tmp_path / "none"), "--device", "cpu"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"check failed: --pkb-root {tmp_path / 'none'}: no reference/ folder (a PKB checkout "
        "at commit 3cc0f9b; see docs/validation.md)"]


@pytest.mark.slow
def test_kernel_kinds_operators_are_described_as_traces_count_them() -> None:
    torch = pytest.importorskip("torch")
    os.environ["KERNEL_KINDS_DEVICE"] = "cpu"
    sys.path.insert(0, str(ROOT / "validate"))
    try:
        import kernel_kinds
    finally:
        os.environ.pop("KERNEL_KINDS_DEVICE")
    kinds: dict[str, set[str]] = {}
    small = [c for c in kernel_kinds.cases(torch, quick=True) if "16384" not in c[3]
             and "4096" not in c[3] and "[67108864]" not in c[3] and "[16777216]" not in c[3]]
    for label, dtype, make, shape in small:
        ops = kernel_kinds.describe(torch, make())
        assert ops, (label, shape)
        kinds.setdefault("+".join(sorted({op.kind for op in ops})), set()).add(label)
        m = parse_measurement({"op": "kernel_kind", "size_bytes": sum(
            op.read_bytes + op.write_bytes for op in ops), "time_us": 1.0,
            "bandwidth_GBps": None, "params": {"kind": ops[0].kind, "dtype": dtype}})
        assert m.size_bytes > 0
    assert {"elementwise", "copy", "fill", "reduction", "index", "scan", "sort", "gemm",
            "conv", "attention", "fft"} <= set(kinds)
    assert "aten.topk" in kinds["sort"] and "aten._log_softmax" in kinds["reduction"]
