"""Tracing the reference at the instance asked, on demand: the tests' tiny PKB checkout, the
cache, and the switches that turn it off."""

from __future__ import annotations

from pathlib import Path

import pytest
from paths import DATA

from pkbsim import api
from pkbsim.trace import launch
from pkbsim.trace.on_demand import SWITCH_ENV, cache_folder


@pytest.fixture
def pkb_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The tiny PKB checkout of the tests (problem 1: clone, all_reduce, out * 0.5 + 1, on a
    (M / 256) x (N / 128) tensor), and a cache of this test's own."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv(SWITCH_ENV, raising=False)
    monkeypatch.delenv("PKB_ROOT", raising=False)
    return DATA / "pkb_tiny"


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
    assert cached.name.startswith("1_allreduce.W8.")
    segments = chosen.program.segments  # type: ignore[attr-defined]
    # the tiny reference: clone, all_reduce of a (3072 / 256) x (1024 / 128) bf16 tensor, ...
    assert [s.end for s in segments] == ["collective", "end"]
    assert segments[0].collective.bytes == 12 * 8 * 2
    no_tracing(monkeypatch)
    again = cli("analyze", "--task", "1", "-w", "8", "--set", "M=3072", "--pkb-root",
                str(pkb_root))
    assert again.code == 0, again.err
    assert f"reference model: traced on demand at W = 8, M=3072, N=1024, cached in {cached}" \
        in again.out
    other = cli("simulate", "--task", "1", "-w", "8", "--set", "M=3072", "--pkb-root",
                str(pkb_root), "--no-trace-on-demand")
    assert "Reference model: derived at W = 8" in other.out
