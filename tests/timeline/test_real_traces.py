"""The H100 traces of docs/measurements/pkb_trace_w1/ (2026-12-06): the split of every
recorded variant sums to the same calls' CUDA-event time, and the report reproduces."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from paths import ROOT

from pkbsim.comparator.timelines import SUM_TOLERANCE, load_traces
from pkbsim.timeline.breakdown import decompose
from pkbsim.timeline.kineto import load_kineto
from pkbsim.timeline.run_log import load_run_log

HERE = ROOT / "docs" / "measurements" / "pkb_trace_w1"
RUNS = [HERE / "candidates_run1" / "logs", HERE / "candidates_run2" / "logs"]


@pytest.mark.parametrize("logs", RUNS, ids=["run1", "run2"])
def test_every_candidate_run_sums_to_its_cuda_events(logs) -> None:
    groups = load_traces(logs)
    assert len(groups) >= 10
    for (problem, variant), (part,) in groups.items():
        assert part.event_mean_us, (problem, variant)
        err = part.mean.total_us / part.event_mean_us - 1
        assert abs(err) <= SUM_TOLERANCE, (problem, variant, err)


def test_the_sync_candidate_shows_its_sync() -> None:
    """23_grad_acc_loss_tolist calls .tolist() on every call: the GPU idles while the host
    waits, and the trace names it."""
    (part,) = load_traces(HERE / "candidates_run2" / "logs")[("23_grad_acc_loss", "tolist")]
    assert part.mean.terms["sync"] > 0
    assert part.timeline.how_calls == "ProfilerStep annotations"
    assert len(part.calls) == 10 and len(part.call_us) == 9


def test_a_reference_without_its_profile_file() -> None:
    """validate/pkb_references.py keeps the trace; its events are in the sweep's summary."""
    trace = (HERE / "references" / "logs" / "problem_34_ulysses_all_gather_into_tensor_primitive"
             / "reference" / "rank_0_trace.json.gz")
    rows = json.loads((HERE / "references" / "summary.json").read_text())["problems"]
    events = next(r for r in rows if r["problem"].startswith("34_"))["call_event_us"]
    d = decompose(load_kineto(trace))
    for call, event in zip(d.calls[1:], events[1:], strict=True):
        assert call.total_us == pytest.approx(event, abs=2.0)  # µs, each call


def test_the_run_log_of_a_trace_counts_the_collectives() -> None:
    (profile,) = load_run_log(RUNS[1] / "problem_73_vocab_parallel_cross_entropy_loss" / "cuda"
                              / "rank_0_trace.json.gz")
    assert profile.iterations == 10
    assert profile.collectives_per_call("c10d::allreduce_") == 2.0


@pytest.mark.slow
def test_the_report_reproduces() -> None:
    done = subprocess.run(
        [sys.executable, "benchmarks/trace_breakdown_report.py",
         f"{HERE}/references/logs:{HERE}/references/summary.json", str(RUNS[0]), str(RUNS[1]),
         "--topology", "docs/measurements/h100-1gpu.yaml", "--title",
         "PKB's references and 14 candidates at W = 1 on one H100: where the measured time went"],
        cwd=ROOT, capture_output=True, text=True, check=True)
    strip = lambda text: text.split("\n", 3)[3]  # noqa: E731 (the header line names the paths)
    assert strip(done.stdout.rstrip("\n") + "\n") == strip((HERE / "report.md").read_text())
