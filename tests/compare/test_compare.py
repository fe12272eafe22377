"""pkbsim compare: one problem and a logs folder against the roofline, the simulator and the
ranked causes; every output format; deterministic plots; bad input as one PkbsimError."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest
from paths import DATA, ROOT

from pkbsim.cli.compare import compare_command
from pkbsim.comparator.comparison import (
    NOT_INSPECTED,
    REFERENCE_GROUP,
    DirectoryComparison,
    compare_problem,
)
from pkbsim.comparator.gap import TERMS
from pkbsim.errors import PkbsimError
from pkbsim.inspection.solution import inspect_file, inspect_source
from pkbsim.pkb.logs import from_value, load_measured
from pkbsim.report.compare_report import SCHEMA, comparison_plot
from pkbsim.task.loader import instantiate, load_task
from pkbsim.topology import load_topology

DATA = DATA
LOGS = DATA / "pkb_logs" / "logs"
ONE_SHOT = DATA / "solutions" / "one_shot_cuda.py"  # sm_peer_ldst, one_shot


def run(tmp_path: Path, *, problem: str | None = None, measured: Path | None = None,
        measured_us: float | None = None, solution: Path | None = None,
        solutions: Path | None = None, world_size: int | None = None, fmt: str = "json",
        plot: Path | None = None, simulate_fixes: bool = False) -> str:
    out = tmp_path / f"out.{fmt}"
    compare_command(problem, measured, measured_us, solution, solutions, "dgx-h100", world_size,
                    "pkb", fmt, out, plot, simulate_fixes=simulate_fixes)
    return out.read_text()


def run_json(tmp_path: Path, **kwargs: Any) -> dict[str, Any]:
    data = json.loads(run(tmp_path, fmt="json", **kwargs))
    assert isinstance(data, dict)
    return data


def variants(data: dict[str, Any], problem: str) -> dict[str, dict[str, Any]]:
    prob = next(p for p in data["problems"] if p["problem"] == problem)
    return {v["variant"]: v for v in prob["variants"]}


# ---------------------------------------------------------------- one problem

def test_one_problem_sums_and_ranks_causes() -> None:
    inst = instantiate(load_task("1"), 8)
    topo = load_topology("dgx-h100")
    meas = [from_value(95.0, "1", "reference"), from_value(40.0, "1", "cuda")]
    c = compare_problem(inst, topo, meas, {"cuda": inspect_file(ONE_SHOT)}, simulate_fixes=False)
    assert c.problem == "1_allreduce" and c.world_size == 8
    assert c.reference is not None and c.reference.mechanisms == ("nccl_payload",)
    (cand,) = c.candidates
    assert cand.mechanisms == ("sm_peer_ldst",) and cand.solution == str(ONE_SHOT)
    assert cand.attainment == c.t_roof_us / 40.0
    assert cand.speedup_vs_reference == 95.0 / 40.0
    assert c.reference.speedup_vs_reference == 1.0
    for v in c.variants:
        terms = v.gap.terms
        assert math.isclose(math.fsum(t.time_us for t in terms), v.measured_us - c.t_roof_us,
                            rel_tol=1e-12, abs_tol=1e-9)
        named = [t.time_us for t in terms[:-1]]
        assert named == sorted(named, reverse=True) and terms[-1].name == "residual"
    assert cand.gap.term("excess_bytes").time_us > 0  # the one-shot read is evidence
    assert c.predicted_custom_best_us < c.predicted_nccl_reference_us


def test_one_problem_table_has_roofline_predicted_and_measured(tmp_path: Path) -> None:
    text = run(tmp_path, problem="allreduce", measured_us=40.0, solution=ONE_SHOT,
               world_size=8, fmt="table", simulate_fixes=True)
    for column in ("ranks", "measured us", "t_roof us", "binding", "pred nccl_ref us",
                   "pred custom_best us", "attainment", "pred after fix us", "excess_bytes",
                   "residual", "1_allreduce / candidate: measured 40 us"):
        assert column in text, column
    data = run_json(tmp_path, problem="allreduce", measured_us=40.0, solution=ONE_SHOT,
                    world_size=8, simulate_fixes=True)
    (v,) = variants(data, "1_allreduce").values()
    causes = v["causes"]
    assert [c["name"] for c in causes][-1] == "residual" and len(causes) == len(TERMS)
    t_roof = data["problems"][0]["t_roof_us"]
    assert math.isclose(sum(c["time_us"] for c in causes), 40.0 - t_roof, rel_tol=1e-12)
    assert any(c["predicted_after_fix_us"] for c in causes[:-1])  # fixes were simulated
    assert v["speedup_vs_reference"] is None  # no reference measured


def test_one_problem_from_logs_with_solution_named_by_backend(tmp_path: Path) -> None:
    data = run_json(tmp_path, problem="1", measured=LOGS, solution=ONE_SHOT)
    got = variants(data, "1_allreduce")
    assert set(got) == {"reference", "cuda"}
    assert got["cuda"]["mechanisms"] == ["sm_peer_ldst"]
    assert got["cuda"]["speedup_vs_reference"] == pytest.approx(46.2 / 31.2, rel=1e-12)
    assert data["problems"][0]["world_size"] == 4  # the ranks measured


# ---------------------------------------------------------------- a logs folder

def test_directory_mode_on_the_logs_fixture(tmp_path: Path) -> None:
    sols = tmp_path / "sols"
    sols.mkdir()
    shutil.copy(ONE_SHOT, sols / "1_allreduce_cuda.py")
    data = run_json(tmp_path, measured=LOGS, solutions=sols)
    assert [p["problem"] for p in data["problems"]] == [
        "1_allreduce", "83_vocab_parallel_log_prob_topk_chunked"]
    assert [p["world_size"] for p in data["problems"]] == [4, 2]
    assert variants(data, "1_allreduce")["cuda"]["mechanisms"] == ["sm_peer_ldst"]
    pk = variants(data, "83_vocab_parallel_log_prob_topk_chunked")["parallelkittens"]
    assert pk["mechanisms"] is None and pk["solution"] is None
    assert pk["causes"][-1]["time_us"] == pytest.approx(pk["gap_us"], rel=1e-12)  # all residual
    summary = {s["mechanism"]: s for s in data["summary"]}
    refs = [variants(data, p["problem"])["reference"]["attainment"] for p in data["problems"]]
    assert summary[REFERENCE_GROUP]["variants"] == 2
    assert summary[REFERENCE_GROUP]["median_attainment"] == pytest.approx(sum(refs) / 2)
    assert summary[NOT_INSPECTED]["median_attainment"] == pk["attainment"]
    assert summary["sm_peer_ldst"]["variants"] == 1
    assert data["errors"] == []


def test_directory_keeps_going_past_a_problem_it_cannot_compare(tmp_path: Path) -> None:
    csv = tmp_path / "times.csv"
    csv.write_text("problem,variant,rank,time_us\n1,cuda,0,30\n1,cuda,1,31\n1,cuda,2,29\n"
                   "83,reference,0,200\n83,reference,1,210\n83,reference,2,205\n")
    data = run_json(tmp_path, measured=csv)
    assert [p["problem"] for p in data["problems"]] == ["1_allreduce"]
    assert data["problems"][0]["world_size"] == 3
    (err,) = data["errors"]
    assert err["problem"].startswith("83_") and "vocab % W == 0" in err["error"]


def test_json_schema_fields(tmp_path: Path) -> None:
    data = run_json(tmp_path, measured=LOGS)
    assert data["schema"] == SCHEMA == "pkbsim.compare/1"
    assert {"pkbsim_version", "source", "topology", "problems", "errors", "summary"} <= set(data)
    prob = data["problems"][0]
    assert {"problem", "topology", "world_size", "t_roof_us", "binding", "predicted",
            "variants"} <= set(prob)
    assert set(prob["predicted"]) == {"nccl_reference_us", "custom_best_us"}
    v = prob["variants"][0]
    assert {"variant", "reference", "measured_us", "attainment", "speedup_vs_reference",
            "solution", "mechanisms", "gap_us", "causes", "notes"} <= set(v)
    assert {"name", "time_us", "share", "evidence", "fix", "predicted_after_fix_us"} <= set(
        v["causes"][0])


def test_markdown_and_html_hold_the_tables(tmp_path: Path) -> None:
    md = run(tmp_path, measured=LOGS, fmt="markdown")
    assert "| problem | ranks | t_roof us | binding | pred nccl_ref us |" in md
    assert "| problem | variant | measured us | attainment | speedup vs ref |" in md
    assert "| # | cause | us | share |" in md and "## Median attainment per mechanism" in md
    assert "| 1_allreduce | cuda | 31.2 |" in md
    page = run(tmp_path, measured=LOGS, fmt="html")
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert '<img alt="attainment and gap causes" src="data:image/png;base64,iVBORw0KGgo' in page
    assert '<th data-type="num" tabindex="0">t_roof us</th>' in page
    assert "<td>1_allreduce</td>" in page and "<tr><th>command</th><td>pkbsim compare</td></tr>" \
        in page  # called as a function, not from the command line


def test_plot_bytes_are_deterministic(tmp_path: Path) -> None:
    first, second = tmp_path / "a.png", tmp_path / "b.png"
    run(tmp_path, measured=LOGS, plot=first)
    run(tmp_path, measured=LOGS, plot=second)
    data = first.read_bytes()
    assert data.startswith(b"\x89PNG") and data == second.read_bytes()
    topo = load_topology("dgx-h100")
    one = compare_problem(instantiate(load_task("1"), 4), topo, load_measured(LOGS).for_problem(
        "1"), simulate_fixes=False)
    result = DirectoryComparison("x", topo.name, (one,))
    assert comparison_plot(result) == comparison_plot(result)
    assert comparison_plot(result) != data  # a different input draws a different picture


# ---------------------------------------------------------------- bad input

@pytest.mark.parametrize(("kwargs", "message"), [
    ({}, "--measured-us TIME or --measured-trace"),
    ({"measured": LOGS, "measured_us": 3.0, "problem": "1"}, "either --measured"),
    ({"measured_us": 3.0}, "--measured-us needs --problem"),
    ({"measured": LOGS, "solution": ONE_SHOT}, "--solution needs --problem"),
    ({"measured": LOGS, "fmt": "csv"}, "--format csv"),
    ({"measured": LOGS, "plot": Path("p.svg")}, "ending in .png"),
    ({"measured": LOGS, "problem": "2"}, "no measured times for problem"),
    ({"measured": DATA / "missing"}, "no such file"),
    ({"problem": "1", "measured_us": -2.0}, "--measured-us"),
    ({"problem": "no_such_task", "measured_us": 2.0}, "no_such_task"),
    ({"measured": LOGS, "world_size": 0}, "--world-size 0: expected an integer >= 1"),
    ({"measured": LOGS, "solutions": DATA / "nothing_here"}, "not a directory"),
    ({"problem": "1", "measured_us": 2.0, "solution": DATA / "none.py"}, "no such file"),
])
def test_bad_input_is_one_pkbsim_error(tmp_path: Path, kwargs: dict[str, Any],
                                       message: str) -> None:
    with pytest.raises(PkbsimError) as info:
        run(tmp_path, **kwargs)
    line = info.value.one_line()
    assert message in line and "\n" not in line
    assert not (tmp_path / "out.json").exists()  # nothing half-written


def test_timeline_marks_measured_times(cli, tmp_path: Path) -> None:
    """--timeline draws the simulated reference with t_roof and the measured times marked:
    the same input gives the same bytes, other marks other bytes; it needs --problem."""
    from pkbsim.report.gantt import gantt_chart
    from pkbsim.sim.run import run_simulation

    logs = ROOT / "docs/measurements/pkb_run_h200_w1/logs"
    a, b = tmp_path / "a.png", tmp_path / "b.png"
    for path in (a, b):
        done = cli("compare", "--problem", "1", "--measured", str(logs), "--topology",
                   "dgx-h200", "--timeline", str(path))
        assert done.code == 0, done.err
    assert a.read_bytes() == b.read_bytes() and a.read_bytes()[:4] == b"\x89PNG"
    sim = run_simulation("1", "nccl_reference", "dgx-h200", 1, "pkb", trace=True)
    assert gantt_chart(sim, "png", (("x", 30.0),)) != gantt_chart(sim, "png")
    bad = cli("compare", "--measured", str(logs), "--timeline", str(tmp_path / "c.png"))
    assert bad.code == 2 and "--timeline needs --problem" in bad.err


# ---------------------------------------------------------------- run logs

def test_profiles_next_to_the_logs_reconcile_the_candidate(tmp_path: Path) -> None:
    """A hot NCCL call that launched no NCCL kernel in the recorded run is a fallback."""
    logs = tmp_path / "logs"
    shutil.copytree(LOGS, logs)
    solution = tmp_path / "1_allreduce_cuda.py"
    solution.write_text("import torch.distributed as dist\n"
                        "def solution(x):\n    dist.all_reduce(x)\n    return x\n")
    before = variants(run_json(tmp_path, problem="1", measured=LOGS, solution=solution),
                      "1_allreduce")
    assert before["cuda"]["mechanisms"] == ["nccl_payload"]
    profile = {"schema": "pkbsim.runprofile/1", "rank": 0, "world_size": 4,
               "variant": "candidate", "solution": None, "device": "cuda", "iterations": 10,
               "torch_version": "2.11.0", "nccl_version": "2.28.9",
               "kernels": [{"name": "copy", "per_call": 1.0, "gpu_us_per_call": 1.0}],
               "nccl_kernels": [], "memcpy": [], "memset": [], "runtime": []}
    for rank in range(4):
        (logs / "problem_1_allreduce" / "cuda" / f"rank_{rank}_profile.json").write_text(
            json.dumps({**profile, "rank": rank}))
    after = variants(run_json(tmp_path, problem="1", measured=logs, solution=solution),
                     "1_allreduce")
    assert after["cuda"]["mechanisms"] == []


def test_a_metadata_collective_is_no_nccl_payload_in_the_comparison() -> None:
    """A candidate that all-reduces a scalar norm and moves its payload with its own kernel:
    its mechanisms, the summary and the carrier leave NCCL out; the gap names the call, its
    size and its simulated latency (issue 32)."""
    kernel = ONE_SHOT.read_text().replace("def solution(", "def _one_shot(", 1)
    source = ("import torch.distributed as dist\n" + kernel
              + "\n\ndef solution(x, ptrs):\n    peak = x.abs().max()\n"
              "    dist.all_reduce(peak, op=dist.ReduceOp.MAX)\n"
              "    return _one_shot(x / peak, ptrs)\n")
    found = inspect_source(source, "1_allreduce_cuda.py")
    [meta] = [s for s in found.call_sites if s.kind == "nccl_metadata"]
    assert (meta.elements, meta.dtype) == (1, "bfloat16")
    assert "nccl_payload" not in found.mechanisms
    inst = instantiate(load_task("1"), 8)
    meas = [from_value(95.0, "1", "reference"), from_value(60.0, "1", "cuda")]
    c = compare_problem(inst, load_topology("dgx-h100"), meas, {"cuda": found},
                        simulate_fixes=False)
    (cand,) = c.candidates
    assert "nccl_payload" not in (cand.mechanisms or ())
    assert cand.gap.ops[0].carried_by == "sm_peer_ldst"
    assert (f"an NCCL all-reduce of 1 bfloat16 value(s) (line {meta.line}) on every call"
            in cand.gap.term("launch_sync_latency").evidence)
