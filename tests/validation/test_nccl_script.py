"""validate/nccl_collectives.py on CPU: torch.distributed with gloo under torchrun, its output
checked against the results schema and nccl-tests' definitions; its closed forms checked
against the collectives' plain definitions. Skipped where torch is absent."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from paths import ROOT

from pkbsim.collectives.bandwidth import BUSBW_FACTOR
from pkbsim.validation.runner import parse_measurement

torch = pytest.importorskip("torch")

SCRIPT = ROOT / "validate" / "nccl_collectives.py"
ALL = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all",
       "gather", "scatter", "send_recv"]


@pytest.fixture(scope="module")
def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("nccl_collectives_under_test", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(tmp_path: Path, nproc: int | None, *args: str, env: dict[str, str] | None = None
        ) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    out = tmp_path / "out.jsonl"
    launcher = [] if nproc is None else ["-m", "torch.distributed.run", "--standalone",
                                         "--nproc-per-node", str(nproc)]
    cmd = [sys.executable, *launcher, str(SCRIPT), "--out", str(out), *args]
    child_env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "RANK"))}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                          env={**child_env, **(env or {})}, check=False)
    lines = [json.loads(x) for x in out.read_text().splitlines()] if out.exists() else []
    return proc, lines


def split(lines: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    data: dict[str, Any] = {}
    for line in lines:
        assert len(line) == 1 and set(line) <= {"measurement", "data"}
        data.update(line.get("data", {}))
    return [line["measurement"] for line in lines if "measurement" in line], data


@pytest.mark.slow
def test_two_ranks_every_collective(tmp_path: Path) -> None:
    proc, lines = run(tmp_path, 2, "--case", "nccl.collectives", "--backend", "gloo", "--quick",
                      "--max-bytes", "65536")
    assert proc.returncode == 0, proc.stderr[-2000:]
    measurements, data = split(lines)
    assert data["checked"] == ALL and data["skipped"] == []
    assert data["backend"] == "gloo" and data["world_size"] == 2
    assert data["nvls_enable"] == "0"  # multicast off outside the nccl.nvls case
    assert [(m["params"]["collective"], m["size_bytes"]) for m in measurements] == [
        (c, s) for c in ALL for s in (1024, 8192, 65536)]
    for raw in measurements:
        m = parse_measurement(raw)  # valid per the results schema
        p = m.params
        assert m.op == "nccl_collective" and m.repeats == 5
        assert m.min_us is not None and m.max_us is not None
        assert m.min_us <= m.time_us <= m.max_us
        algbw = m.size_bytes / m.time_us / 1e3  # bytes per us -> GB/s
        assert m.bandwidth_GBps == pytest.approx(algbw, rel=1e-12)
        assert p["algbw_GBps"] == pytest.approx(algbw, rel=1e-12)
        assert p["busbw_GBps"] == pytest.approx(algbw * BUSBW_FACTOR[p["collective"]](2),
                                                rel=1e-12)
        assert (p["world_size"], p["backend"], p["dtype"]) == (2, "gloo", "float32")
        assert p["nccl_algo"] is None and p["nccl_proto"] is None and p["calls"] == 20


@pytest.mark.slow
def test_three_ranks_round_shards_and_record_nccl_env(tmp_path: Path) -> None:
    proc, lines = run(tmp_path, 3, "--case", "nccl.nvls", "--backend", "gloo",
                      "--collectives", "all_gather,all_to_all,reduce_scatter,send_recv",
                      "--min-bytes", "1024", "--max-bytes", "1024",
                      env={"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    measurements, data = split(lines)
    assert data["nvls_enable"] is None  # the nccl.nvls case leaves multicast to the runner
    assert [(m["params"]["collective"], m["size_bytes"]) for m in measurements] == [
        ("all_gather", 1020), ("all_to_all", 1020), ("reduce_scatter", 1020),
        ("send_recv", 1024)]  # 256 floats, rounded down to a multiple of 3 where sharded
    p = measurements[0]["params"]
    assert (p["world_size"], p["nccl_algo"], p["nccl_proto"]) == (3, "Ring", "LL")
    assert p["busbw_GBps"] == pytest.approx(p["algbw_GBps"] * 2 / 3, rel=1e-12)
    assert measurements[0]["repeats"] == 10  # not --quick


@pytest.mark.slow
def test_one_process_without_torchrun(tmp_path: Path) -> None:
    proc, lines = run(tmp_path, None, "--case", "nccl.collectives", "--max-bytes", "1024")
    assert proc.returncode == 0, proc.stderr[-2000:]
    measurements, data = split(lines)
    assert data["world_size"] == 1 and data["skipped"] == ["send_recv"]
    assert data["skip_reasons"] == {"send_recv": "needs 2 ranks"}
    assert len(measurements) == 8
    assert all(m["params"]["busbw_GBps"] == 0.0 for m in measurements
               if m["params"]["collective"] in ("all_reduce", "all_gather"))


@pytest.mark.slow
def test_bad_arguments(tmp_path: Path) -> None:
    proc, lines = run(tmp_path, None, "--case", "x", "--collectives", "all_reduce,allreduce")
    assert proc.returncode == 2 and lines == []
    assert "unknown allreduce" in proc.stderr
    proc, _ = run(tmp_path, None, "--case", "x", "--min-bytes", "4096", "--max-bytes", "1024")
    assert proc.returncode == 2 and "--min-bytes" in proc.stderr


def reference(collective: str, inputs: list[Any], rank: int, n: int) -> Any:
    """The collective by its definition, from every rank's input."""
    total = sum(inputs[1:], inputs[0].clone())
    if collective == "all_reduce":
        return total
    if collective == "reduce":
        return total if rank == 0 else None
    if collective == "broadcast":
        return inputs[0]
    if collective == "all_gather" or (collective == "gather" and rank == 0):
        return torch.cat(inputs)
    if collective == "gather":
        return None
    if collective == "reduce_scatter":
        return total.chunk(n)[rank]
    if collective == "all_to_all":
        return torch.cat([inputs[r].chunk(n)[rank] for r in range(n)])
    if collective == "scatter":
        return inputs[0].chunk(n)[rank]
    assert collective == "send_recv"
    return inputs[(rank - 1) % n]


@pytest.mark.parametrize("n", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("collective", ALL)
def test_closed_forms_match_the_definitions(script: ModuleType, collective: str, n: int
                                            ) -> None:
    cpu = torch.device("cpu")
    count = script.count_for(collective, 4096, n)
    inputs = [script.buffers(collective, count, r, n, cpu)[0] for r in range(n)]
    for rank in range(n):
        want = script.expected(collective, count, rank, n, cpu)
        ref = reference(collective, inputs, rank, n)
        if ref is None:
            assert want is None
            continue
        assert want is not None and script.mismatch(want, ref) is None
        out = script.buffers(collective, count, rank, n, cpu)[1]
        if out is not None:  # the poisoned output fails the check until written
            assert script.mismatch(out, want).startswith("element 0 is nan")


def test_inputs_never_zero_and_checks_catch_one_wrong_element(script: ModuleType) -> None:
    cpu = torch.device("cpu")
    x = script.pattern(1, 0, 16, cpu)
    assert x.tolist() == [2.0 * (1 + j % 7) for j in range(16)]
    assert script.expected("all_reduce", 8, 0, 2, cpu).tolist() == [3, 6, 9, 12, 15, 18, 21, 3]
    y = x.clone()
    y[13] = 0.0
    assert script.mismatch(y, x) == "element 13 is 0.0, expected 14.0"
    assert script.mismatch(x[:8], x) == "shape (8,), expected (16,)"


@pytest.mark.parametrize("n", [1, 2, 3, 8, 72])
def test_busbw_factors_are_pkbsims(script: ModuleType, n: int) -> None:
    for collective in ALL:
        algbw, busbw = script.busbw_GBps(collective, 2_000_000, n, 4.0)
        assert algbw == 500.0
        assert busbw == pytest.approx(500.0 * BUSBW_FACTOR[collective](n), rel=1e-15)
