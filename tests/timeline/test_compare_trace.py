"""`pkbsim compare --measured-trace` and `pkbsim inspect --run-log TRACE`, end to end."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pytest
from kineto_traces import TraceBuilder
from paths import ROOT

from pkbsim.comparator.reference import reference_model
from pkbsim.sim import SimOptions
from pkbsim.task.loader import instantiate, load_task
from pkbsim.timeline.breakdown import decompose
from pkbsim.timeline.model import model_timeline
from pkbsim.topology import load_topology

H100 = str(ROOT / "docs" / "measurements" / "h100-1gpu.yaml")


def reference_trace(b: TraceBuilder, calls: int = 3) -> None:
    """PKB problem 1's reference at W = 1 as pkbsim run profiles it: per call an eager copy,
    then c10d::allreduce_ (no NCCL kernel at one rank)."""
    for k in range(calls):
        t0 = 60.0 * k
        b.host(f"ProfilerStep#{k + 1}", t0, 40, cat="user_annotation")
        b.host("aten::copy_", t0 + 2, 8)
        b.launch(t0 + 5, 3, t0 + 10, 4, "Memcpy DtoD (Device -> Device)",
                 api="cudaMemcpyAsync", cat="gpu_memcpy")
        b.host("c10d::allreduce_", t0 + 12, 25)


def pkb_layout(tmp_path: Path, events_us: list[float] | None = None) -> Path:
    folder = tmp_path / "logs" / "problem_1_allreduce" / "reference"
    folder.mkdir(parents=True)
    b = TraceBuilder(0, 1)
    reference_trace(b)
    (folder / "rank_0_trace.json.gz").write_bytes(gzip.compress(json.dumps(b.data()).encode()))
    if events_us is not None:
        (folder / "rank_0_profile.json").write_text(json.dumps({"call_event_us": events_us}))
    return tmp_path / "logs"


def test_compare_splits_the_trace_beside_the_model(cli, tmp_path: Path) -> None:
    logs = pkb_layout(tmp_path, events_us=[95.0, 60.0, 40.0])
    res = cli("compare", "--measured-trace", str(logs), "--topology", H100, "--format", "json")
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    problem = doc["problems"][0]
    assert problem["problem"] == "1_allreduce"
    (tl,) = problem["timelines"]
    # 3 calls, the first left out as the profiler's warm-up: calls 60-120 (back to back: up to
    # the next call's start) and 120-160 (the last: up to its host end)
    assert tl["variant"] == "reference" and tl["calls"] == 2
    assert tl["measured_call_us"] == pytest.approx(50.0)
    terms = {t["term"]: t for t in tl["terms"]}
    assert terms["host_launch"]["measured_us"] == pytest.approx(46.0)
    assert terms["kernel:copy"]["measured_us"] == pytest.approx(4.0)
    assert tl["cuda_event_call_us"] == pytest.approx(50.0)
    assert tl["sum_error"] == pytest.approx(0.0)
    assert tl["host_launch_by_operator_us"]["c10d::allreduce_"] == pytest.approx(23.0)
    assert tl["model"].startswith("nccl_reference")
    model = sum(t["model_us"] for t in tl["terms"])
    assert model == pytest.approx(tl["model_call_us"])
    for t in tl["terms"]:
        assert t["diff_us"] == pytest.approx(t["model_us"] - t["measured_us"])
    # the measured time of the variant is the CUDA-event mean where the run recorded one
    assert problem["variants"][0]["measured_us"] == pytest.approx(50.0)


def test_the_table_shows_the_split(cli, tmp_path: Path) -> None:
    res = cli("compare", "--measured-trace", str(pkb_layout(tmp_path)), "--topology", H100)
    assert res.code == 0, res.err
    assert "where the measured time went" in res.out
    assert "GPU idle, waiting for the host (launch-bound)" in res.out
    assert "c10d::allreduce_ 23" in res.out  # 14-37: the GPU idle part


def test_a_lone_trace_needs_its_problem(cli, tmp_path: Path) -> None:
    b = TraceBuilder()
    reference_trace(b)
    trace = b.write(tmp_path / "mine.json")
    res = cli("compare", "--measured-trace", str(trace), "--topology", H100)
    assert res.code == 2 and "name its problem with --problem" in res.err
    res = cli("compare", "--problem", "1", "--measured-trace", str(trace), "--topology", H100,
              "--format", "json")
    assert res.code == 0, res.err
    assert json.loads(res.out)["problems"][0]["timelines"][0]["variant"] == "trace"


@pytest.mark.parametrize("content, field", [
    (b"{not json", None),
    (json.dumps({"traceEvents": 3}).encode(), "traceEvents"),
    (json.dumps({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": "1",
                                  "dur": 1}]}).encode(), "traceEvents[0].ts"),
    (json.dumps({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1,
                                  "dur": -1}]}).encode(), "traceEvents[0].dur"),
    (gzip.compress(b'{"traceEvents": []}')[:-6], None),
    (b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": NaN, "dur": 1}]}',
     None),
])
def test_a_bad_trace_is_one_line(cli, tmp_path: Path, content: bytes, field: str | None
                                 ) -> None:
    bad = tmp_path / "rank_0_trace.json"
    bad.write_bytes(content)
    res = cli("compare", "--problem", "1", "--measured-trace", str(bad), "--topology", H100)
    assert res.code == 2
    assert len(res.err.strip().splitlines()) == 1 and str(bad) in res.err
    assert "Traceback" not in res.err
    if field:
        assert field in res.err


def test_the_trace_size_is_bounded(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                   ) -> None:
    b = TraceBuilder()
    reference_trace(b, calls=50)
    trace = tmp_path / "rank_0_trace.json.gz"
    trace.write_bytes(gzip.compress(json.dumps(b.data()).encode()))
    monkeypatch.setenv("PKBSIM_MAX_KINETO_TRACE_BYTES", "10000")
    res = cli("compare", "--problem", "1", "--measured-trace", str(trace), "--topology", H100)
    assert res.code == 2 and "PKBSIM_MAX_KINETO_TRACE_BYTES" in res.err


def test_inspect_reconciles_with_a_trace(cli, tmp_path: Path) -> None:
    """A user's trace stands in for pkbsim run's profile: NCCL ran (c10d::allreduce_)."""
    b = TraceBuilder()
    reference_trace(b)
    trace = b.write(tmp_path / "my_trace.json")
    solution = tmp_path / "1_allreduce_mine.py"
    solution.write_text("import torch\n\ndef solution(x):\n    return x.clone()\n")
    res = cli("inspect", str(solution), "--run-log", str(trace), "--format", "json")
    assert res.code == 0, res.err
    sites = json.loads(res.out)["files"][0]["call_sites"]
    assert [(s["kind"], s["path"], s["source"]) for s in sites] == [
        ("nccl_payload", "hot", "profiler")]


@pytest.mark.parametrize("task, kinds", [("13_gemm_allreduce", {"kernel:gemm"}),
                                         ("1_allreduce", set())])
def test_the_model_splits_its_own_iteration(task: str, kinds: set[str]) -> None:
    """The simulated iteration splits into the same terms, summing to its window."""
    topo = load_topology(H100)
    inst = instantiate(load_task(task), 1, "pkb")
    model = reference_model(inst)
    result = model.simulate(topo, SimOptions())
    prog = model.program.program if model.program is not None else None
    d = decompose(model_timeline(result, prog)).mean
    assert math.isclose(sum(d.terms.values()), result.window_us[1] - result.window_us[0],
                        rel_tol=1e-9)
    assert math.isclose(d.total_us, result.predicted_us, rel_tol=1e-3)
    assert kinds <= set(d.terms)
    assert d.terms.get("host_launch", 0) > 0
