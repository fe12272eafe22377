"""``pkbsim simulate`` and analyze's predictions end to end: what users type and read."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from jsoncheck import get
from paths import ROOT

from pkbsim.sim.run import run_simulation

CONTRACT = ["schema", "task.id", "topology.name", "world_size", "preset", "strategy.name",
            "strategy.pieces", "iterations", "predicted_us", "per_rank_us", "slowest_rank",
            "bound_by", "roofline.t_roof_us", "ops", "links", "sm_utilization",
            "critical_path", "events.flows", "provenance.topology_sha256"]


def test_simulate_table(cli) -> None:
    r = cli("simulate", "--task", "grpo")
    assert r.code == 0, r.err
    assert re.search(r"^Predicted [\d,.]+ us per iteration", r.out, re.M)  # README: the value
    for text in ("Strategy nccl_reference",
                 "Critical path bound by: host", "Reference model: traced",
                 "seg0", "0 kernels, then all_to_all", "nccl_ll/direct",
                 "Busiest links", "Critical path of the measured iteration"):
        assert text in r.out
    assert r.err == ""


def test_simulate_json_contract(cli) -> None:
    r = cli("simulate", "--task", "grpo", "--strategy", "custom_best", "--format", "json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    for key in CONTRACT:
        get(data, key)
    assert data["schema"] == "pkbsim.simulation/1"
    assert data["strategy"]["name"] == "custom_best"
    tried = data["strategy"]["pieces_tried"]
    assert "1" in tried and set(tried) <= {"1", "2", "4", "8"}
    assert data["predicted_us"] == min(data["strategy"]["pieces_tried"].values())
    assert max(data["per_rank_us"]) == data["predicted_us"]
    assert data["predicted_us"] >= data["roofline"]["t_roof_us"]
    assert [op["id"] for op in data["ops"]] == ["a2a_logits", "topk_topp_logprob",
                                                "ag_logprobs"]


def test_simulate_writes_trace_and_gantt(cli, tmp_path: Path) -> None:
    trace, gantt = tmp_path / "t.json", tmp_path / "g.png"
    r = cli("simulate", "--task", "grpo", "--trace", str(trace), "--gantt", str(gantt),
            "--out", str(tmp_path / "table.txt"))
    assert r.code == 0, r.err
    assert json.loads(trace.read_text())["traceEvents"]
    assert gantt.read_bytes().startswith(b"\x89PNG")
    assert "Predicted" in (tmp_path / "table.txt").read_text()


def test_simulate_options_reach_the_model(cli) -> None:
    base = json.loads(cli("simulate", "-t", "grpo", "--preset", "blog-16k", "--strategy",
                          "custom_best", "--format", "json").out)
    fast = json.loads(cli("simulate", "-t", "grpo", "--preset", "blog-16k", "--strategy",
                          "custom_best", "--set", "scale_up.link_bandwidth_GBps=50",
                          "--format", "json").out)
    assert fast["provenance"]["topology_overrides"] == {"scale_up.link_bandwidth_GBps": 50}
    assert fast["predicted_us"] < 0.6 * base["predicted_us"]
    one = json.loads(cli("simulate", "-t", "grpo", "--iterations", "1", "--format",
                         "json").out)
    assert one["iterations"] == 1


def test_override_changes_the_choice(cli) -> None:
    r = cli("simulate", "-t", "grpo", "--strategy", "custom_best", "--override",
            "a2a_logits.mechanism=copy_engine", "--override", "ag_logprobs.sms=4",
            "--format", "json")
    data = json.loads(r.out)
    how = {op["id"]: op["how"] for op in data["ops"]}
    assert how["a2a_logits"]["mechanism"] == "copy_engine"
    assert how["ag_logprobs"]["sms"] == 4
    assert data["strategy"]["overrides"] == {"a2a_logits": {"mechanism": "copy_engine"},
                                             "ag_logprobs": {"sms": 4}}
    nccl = json.loads(cli("simulate", "-t", "grpo", "--override",
                          "a2a_logits.protocol=Simple", "--format", "json").out)
    assert nccl["ops"][0]["how"]["protocol"] == "Simple"


def test_strategy_file(cli) -> None:
    r = cli("simulate", "-t", "grpo", "--preset", "blog-16k", "--strategy",
            str(ROOT / "docs" / "examples" / "grpo-custom.yaml"), "--format", "json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert data["strategy"]["pieces"] == 2 and data["strategy"]["pieces_tried"] == {}
    how = {op["id"]: op["how"] for op in data["ops"]}
    assert (how["a2a_logits"]["mechanism"], how["a2a_logits"]["sms"]) == ("tma", 16)
    assert how["ag_logprobs"]["mechanism"] == "copy_engine"


@pytest.mark.parametrize(("args", "message"), [
    (["--strategy", "fastest"], "unknown strategy 'fastest'"),
    (["--override", "a2a_logits.colour=red"], "unknown key"),
    (["--override", "a2a_logits"], "expected KEY=VALUE"),
    (["--override", "nope.mechanism=tma"], "unknown op 'nope'"),
    (["--override", "a2a_logits.chunks=zero"], "expected an integer"),
    (["--strategy", "custom_best", "--override", "a2a_logits.mechanism=nvls_multimem"],
     "no way to carry all_to_all with mechanism nvls_multimem"),
    (["--gantt", "out.gif"], "expected a file ending in .png, .svg or .pdf"),
    (["--trace", "/no/such/folder/t.json"], "does not exist"),
    (["--iterations", "0"], "--iterations 0: expected an integer >= 1 and <= 1,000"),
    (["--world-size", "16"], "needs 16 GPUs"),
    (["--format", "csv"], "simulate writes table or json"),
])
def test_bad_input_is_one_line(cli, args: list[str], message: str) -> None:
    r = cli("simulate", "--task", "grpo", *args)
    assert r.code == 2
    assert message in r.err, r.err
    assert r.err.count("\n") == 1 and "Traceback" not in r.err


def test_bad_strategy_file_names_file_and_field(cli, tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("base: custom_best\nops:\n  a2a_logits: {mechanism: tma, speed: 3}\n")
    r = cli("simulate", "--task", "grpo", "--strategy", str(path))
    assert r.code == 2 and str(path) in r.err and "a2a_logits.speed" in r.err
    path.write_text("base: fastest\n")
    r = cli("simulate", "--task", "grpo", "--strategy", str(path))
    assert r.code == 2 and str(path) in r.err and "base" in r.err
    path.write_text("base: custom_best\nchunks: 2\nextra: 1\n")
    r = cli("simulate", "--task", "grpo", "--strategy", str(path))
    assert r.code == 2 and "extra" in r.err


def test_failed_run_keeps_earlier_output(cli, tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    out.write_text("earlier result\n")
    r = cli("simulate", "--task", "grpo", "--out", str(out), "--override", "x.mechanism=tma")
    assert r.code == 2
    assert out.read_text() == "earlier result\n"


def test_analyze_reports_predictions(cli) -> None:
    data = json.loads(cli("analyze", "--task", "grpo", "--format", "json").out)
    pred = data["prediction"]
    assert pred["nccl_reference_us"] == run_simulation("grpo", "nccl_reference").predicted_us
    assert pred["custom_best_us"] == run_simulation("grpo", "custom_best").predicted_us
    assert pred["nccl_reference_bound_by"] == "host"
    assert pred["custom_best_us"] < pred["nccl_reference_us"]
    none = json.loads(cli("analyze", "--task", "grpo", "--no-predict", "--format", "json").out)
    assert none["prediction"] is None
    table = cli("analyze", "--task", "grpo").out
    assert re.search(r"^  nccl_reference +[\d,.]+ us  bound by host", table, re.M)


@pytest.mark.slow
def test_simulate_as_a_new_process(tmp_path: Path) -> None:
    gantt = tmp_path / "g.svg"
    done = subprocess.run([sys.executable, "-m", "pkbsim", "simulate", "--task", "grpo",
                           "--strategy", "custom_best", "--gantt", str(gantt)],
                          capture_output=True, text=True, cwd=tmp_path, check=False)
    assert done.returncode == 0, done.stderr
    assert re.search(r"^Predicted [\d,.]+ us per iteration", done.stdout, re.M)
    assert gantt.read_text().lstrip().startswith("<?xml")


def test_readme_simulate_lines_are_true(cli) -> None:
    readme = (ROOT / "README.md").read_text()
    for strategy in ("nccl_reference", "custom_best"):
        lines = cli("simulate", "--task", "grpo", "--strategy", strategy).out.splitlines()[2:6]
        lines = [line for line in lines if not line.startswith("Per op")]
        for line in lines:
            assert line in readme, line


def test_docs_what_if_table_is_true() -> None:
    text = (ROOT / "docs" / "simulation.md").read_text()
    rows = {
        "dgx-h100": ("dgx-h100", {}),
        "dgx-h100 `--set scale_up.link_bandwidth_GBps=50` (NVLink x2)":
            ("dgx-h100", {"scale_up.link_bandwidth_GBps": "50"}),
        "hgx-b200": ("hgx-b200", {}),
    }
    from pkbsim.roofline import roofline

    for label, (topo, sets) in rows.items():
        ref = run_simulation("grpo", "nccl_reference", topo, preset="blog-16k", sets=sets)
        best = run_simulation("grpo", "custom_best", topo, preset="blog-16k", sets=sets)
        t_roof = roofline(ref.instance, ref.topology).t_roof_s * 1e6
        row = f"| {label} | {t_roof:.0f} | {ref.predicted_us:.0f} | {best.predicted_us:.0f} |"
        assert row in text, row
    assert re.search(r"what-if table: checked by tests/cli/test_sim_cli.py", text)


def test_per_gpu_nvlink_bandwidth_what_if(cli) -> None:
    """--set nvlink.bandwidth_GBps=900 (or scale_up.bandwidth_GBps) sets the per-GPU rate."""
    base = json.loads(cli("analyze", "-t", "1", "--no-predict", "--format", "json").out)
    for key in ("nvlink.bandwidth_GBps", "scale_up.bandwidth_GBps"):
        data = json.loads(cli("analyze", "-t", "1", "--no-predict", "--set", f"{key}=900",
                              "--format", "json").out)
        assert data["topology"]["peer_line_rate_GBps"] == 900
        assert data["roofline"]["t_comm_us"] == pytest.approx(
            base["roofline"]["t_comm_us"] / 2, rel=1e-6)
    r = cli("analyze", "-t", "1", "--topology", "pcie-l40s-8", "--set",
            "nvlink.bandwidth_GBps=900")
    assert r.code == 2 and "scale_up.links_per_gpu" in r.err
    r = cli("analyze", "-t", "1", "--set", "nvlink.bandwidth_GBps=fast")
    assert r.code == 2 and "expected a number" in r.err
