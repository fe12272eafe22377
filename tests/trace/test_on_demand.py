"""Tracing the reference at the instance asked, on demand: a stand-in PKB checkout (a tiny
reference of this test's own), the cache, and the switches that turn it off."""

from __future__ import annotations

from pathlib import Path

import pytest

from pkbsim import api
from pkbsim.trace import launch
from pkbsim.trace.on_demand import SWITCH_ENV, cache_folder

REFERENCE = """import torch.distributed as dist


def solution(x):
    y = x * 2
    dist.all_reduce(y)
    return y + 1
"""
INPUTS = """import torch


def create_input_tensor(rank, world_size, problem_id, shape, dtype, trial=0, device="cpu"):
    return (torch.randn(shape, dtype=dtype, device=device),)
"""


@pytest.fixture
def pkb_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "pkb"
    (root / "reference").mkdir(parents=True)
    (root / "utils").mkdir()
    (root / "reference" / "1_allreduce.py").write_text(REFERENCE)
    (root / "utils" / "input_output_tensors.py").write_text(INPUTS)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv(SWITCH_ENV, raising=False)
    monkeypatch.delenv("PKB_ROOT", raising=False)
    return root


def reference_model(report: api.AnalysisReport) -> object:
    program = report.result.predictions["nccl_reference"].strategy.program
    assert program is not None
    return program


def no_tracing(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(job: object) -> None:
        raise AssertionError("traced although it should not have been")
    monkeypatch.setattr(launch, "run_trace", refuse)


def test_without_a_checkout_the_derived_program_says_why(pkb_root: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    no_tracing(monkeypatch)
    chosen = reference_model(api.analyze("1", world_size=8, sets={"M": 3072}))
    assert chosen.how == "derived"  # type: ignore[attr-defined]
    assert chosen.note.startswith("not traced on demand: ")  # type: ignore[attr-defined]
    assert "PKB_ROOT" in chosen.describe() or "torch" in chosen.describe()  # type: ignore


def test_the_switches_turn_it_off(pkb_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    no_tracing(monkeypatch)
    off = reference_model(api.analyze("1", world_size=8, sets={"M": 3072}, pkb_root=pkb_root,
                                      trace_on_demand=False))
    assert off.how == "derived" and "tracing on demand is off" in off.note  # type: ignore
    monkeypatch.setenv(SWITCH_ENV, "0")
    env_off = reference_model(api.analyze("1", world_size=8, sets={"M": 3072},
                                          pkb_root=pkb_root))
    assert env_off.how == "derived" and "is off" in env_off.note  # type: ignore
    exact = reference_model(api.analyze("1", world_size=8, pkb_root=pkb_root))
    assert exact.how == "exact"  # type: ignore[attr-defined]


@pytest.mark.slow
def test_an_untraced_instance_is_traced_once_then_read_from_the_cache(
        pkb_root: Path, monkeypatch: pytest.MonkeyPatch, cli) -> None:
    pytest.importorskip("torch")
    chosen = reference_model(api.analyze("1", world_size=8, sets={"M": 3072},
                                         pkb_root=pkb_root))
    assert chosen.how == "on_demand", chosen.describe()  # type: ignore[attr-defined]
    cached = Path(chosen.cache)  # type: ignore[attr-defined]
    assert cached.is_file() and cached.parent == cache_folder()
    assert str(cache_folder()).startswith(str(pkb_root.parent / "cache"))
    segments = chosen.program.segments  # type: ignore[attr-defined]
    # the stand-in reference: x * 2, all_reduce of 3072 x 1024 bf16, + 1
    assert [s.end for s in segments] == ["collective", "end"]
    assert segments[0].collective.bytes == 3072 * 1024 * 2
    no_tracing(monkeypatch)
    again = cli("analyze", "--task", "1", "-w", "8", "--set", "M=3072", "--pkb-root",
                str(pkb_root))
    assert again.code == 0, again.err
    assert f"reference model: traced on demand at W = 8, M=3072, N=1024, cached in {cached}" \
        in again.out
    other = cli("simulate", "--task", "1", "-w", "8", "--set", "M=3072", "--pkb-root",
                str(pkb_root), "--no-trace-on-demand")
    assert "Reference model: derived at W = 8" in other.out
