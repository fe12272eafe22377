"""The command line end to end: what users type, what they read, what scripts parse."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from jsoncheck import get
from paths import ROOT

CONTRACT = ["task.id", "task.name", "topology.name", "world_size", "preset", "ops",
            "roofline.t_comm_us", "roofline.t_comm_line_rate_us", "roofline.t_mem_us",
            "roofline.t_comp_us", "roofline.t_latency_floor_us", "roofline.t_roof_us",
            "roofline.binding", "attainment", "provenance.pkbsim_version",
            "provenance.topology_sha256", "provenance.parameters"]


def test_analyze_grpo_table(cli) -> None:
    r = cli("analyze", "--task", "grpo")
    assert r.code == 0, r.err
    for text in ("Task 83 vocab_parallel_log_prob_topk_chunked (grpo)", "dgx-h100",
                 "a2a_logits", "ag_logprobs", "t_latency_floor", "t_roof", "binding: latency",
                 "Why:"):
        assert text in r.out
    assert r.err == ""


def test_analyze_json_contract(cli) -> None:
    r = cli("analyze", "--task", "grpo", "--format", "json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    for key in CONTRACT:
        get(data, key)
    assert data["task"]["id"] == 83 and data["world_size"] == 8 and data["preset"] == "pkb"
    assert data["attainment"] is None
    kinds = [op["kind"] for op in data["ops"]]
    assert kinds == ["all_to_all", "compute", "all_gather"]
    assert [op["bytes_per_rank"] for op in data["ops"]] == [1024, 0, 8]
    roof = data["roofline"]
    assert roof["t_roof_us"] == max(roof["t_comm_us"], roof["t_mem_us"], roof["t_comp_us"],
                                    roof["t_latency_floor_us"])
    assert data["provenance"]["parameters"]["vocab"] == 256
    assert len(data["provenance"]["topology_sha256"]) == 64


def test_json_is_deterministic(cli) -> None:
    a = cli("analyze", "--task", "grpo", "--format", "json").out
    b = cli("analyze", "--task", "grpo", "--format", "json").out
    assert a == b


def test_measured_gives_attainment(cli) -> None:
    r = cli("analyze", "--task", "grpo", "--format", "json", "--measured-us", "24.4")
    data = json.loads(r.out)
    assert data["measured_us"] == 24.4
    assert data["attainment"] == pytest.approx(data["roofline"]["t_roof_us"] / 24.4, rel=1e-5)
    table = cli("analyze", "--task", "grpo", "--measured-us", "24.4").out
    assert "attainment t_roof / measured" in table


def test_options_reach_the_model(cli) -> None:
    r = cli("analyze", "-t", "grpo", "--world-size", "4", "--preset", "blog-1k", "--set",
            "seq=2048", "--set", "scale_up.link_bandwidth_GBps=50", "--format", "json")
    data = json.loads(r.out)
    assert data["world_size"] == 4 and data["preset"] == "blog-1k"
    assert data["parameters"]["seq"] == 2048
    assert data["provenance"]["topology_overrides"] == {"scale_up.link_bandwidth_GBps": 50}
    assert data["topology"]["peer_line_rate_GBps"] == 900


def test_out_writes_file(cli, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    r = cli("analyze", "--task", "grpo", "--format", "json", "--out", str(out))
    assert r.code == 0 and r.out == ""
    assert json.loads(out.read_text())["task"]["name"] == "vocab_parallel_log_prob_topk_chunked"


def test_failed_run_keeps_earlier_output(cli, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    cli("analyze", "--task", "grpo", "--format", "json", "--out", str(out))
    before = out.read_text()
    r = cli("analyze", "--task", "grpo", "--world-size", "3", "--out", str(out))
    assert r.code == 2
    assert out.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temp files left


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["analyze", "--task", "no_such_task"], "unknown task 'no_such_task'"),
        (["analyze", "--task", "vocab_parallel_log_prob_topk_chunkd"], "did you mean"),
        (["analyze", "--task", "grpo", "--world-size", "3"], "constraint 'vocab % W == 0'"),
        (["analyze", "--task", "grpo", "--world-size", "16"], "has 8"),
        (["analyze", "--task", "grpo", "--set", "hidden=3"], "unknown --set key 'hidden'"),
        (["analyze", "--task", "grpo", "--set", "vocab"], "expected KEY=VALUE"),
        (["analyze", "--task", "grpo", "--set", "vocab=big"], "expected a number"),
        (["analyze", "--task", "grpo", "--set", "scale_up.warp=9"], "no such topology field"),
        (["analyze", "--task", "grpo", "--topology", "dgx-h10"], "did you mean dgx-h100"),
        (["analyze", "--task", "grpo", "--preset", "huge"], "no preset 'huge'"),
        (["analyze", "--task", "grpo", "--measured-us", "-1"], "expected a number >= 0.001"),
        (["analyze", "--task", "grpo", "--format", "xml"], "--format"),
        (["analyze"], "give either --task NAME or --all"),
        (["tasks", "show", "nope"], "unknown task"),
        (["topo", "show", "nope"], "unknown topology"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(cli, args: list[str], needle: str) -> None:
    r = cli(*args)
    assert r.code == 2
    assert r.out == ""
    assert r.err.count("\n") == 1 and r.err.startswith("pkbsim: error: ")
    assert needle in r.err
    assert "Traceback" not in r.err


def test_malformed_topology_file_names_file_and_field(cli, tmp_path: Path) -> None:
    bad = tmp_path / "mine.yaml"
    text = (ROOT / "topologies" / "dgx-h100.yaml").read_text()
    bad.write_text(text.replace("sm_count: 132", "sm_count: many"))
    r = cli("analyze", "--task", "grpo", "--topology", str(bad))
    assert r.code == 2
    assert f"{bad}: gpu.sm_count: expected an integer, got 'many'" in r.err


def test_malformed_task_file_names_file_and_field(cli, tmp_path: Path) -> None:
    bad = tmp_path / "task.yaml"
    text = (ROOT / "tasks" / "83_vocab_parallel_log_prob_topk_chunked.yaml").read_text()
    bad.write_text(text.replace('elements_per_rank: "local_tokens"',
                                'elements_per_rank: "local_tokens +"'))
    r = cli("analyze", "--task", str(bad))
    assert r.code == 2
    assert f"{bad}: ops[2].elements_per_rank: cannot parse" in r.err


def test_topo_and_tasks_commands(cli) -> None:
    r = cli("topo", "list")
    assert r.code == 0 and "dgx-h100" in r.out and "450" in r.out
    r = cli("topo", "show", "dgx-h100")
    assert r.code == 0 and "scale_up.link_bandwidth_GBps" in r.out and "[S2]" in r.out
    r = cli("topo", "show", "h100-ib-2node")
    assert r.code == 0 and "scale_out.fabric" in r.out and "infiniband" in r.out
    # a step cost the file does not set is its fabric kind's, sourced from the kind's file
    assert "fabric kind infiniband (topologies/fabrics/infiniband.yaml)" in r.out
    assert "fabric kind nvswitch (topologies/fabrics/nvswitch.yaml)" in r.out
    r = cli("tasks", "list")
    assert r.code == 0 and "vocab_parallel_log_prob_topk_chunked" in r.out and "grpo" in r.out
    r = cli("tasks", "show", "grpo", "--world-size", "4")
    assert r.code == 0 and "n_chunks" in r.out and "blog-16k" in r.out


def test_version_and_help(cli) -> None:
    assert cli("--version").out.startswith("pkbsim ")
    r = cli()
    assert r.code == 0 and "analyze" in r.out


def test_console_script_in_a_subprocess() -> None:
    """No traceback reaches a user, even through the real process boundary."""
    ok = subprocess.run([sys.executable, "-m", "pkbsim", "analyze", "--task", "grpo"],
                        capture_output=True, text=True, cwd=ROOT / "docs", check=False)
    assert ok.returncode == 0 and "t_roof" in ok.stdout
    bad = subprocess.run([sys.executable, "-m", "pkbsim", "analyze", "--task", "zzz"],
                         capture_output=True, text=True, check=False)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1


def test_readme_what_if_table_is_true(cli) -> None:
    """The README's what-if table quotes these numbers; keep it true."""
    text = (ROOT / "README.md").read_text()
    rows = [
        (["--topology", "dgx-h100"], "| dgx-h100 | 7.60 | 5.24 |"),
        (["--topology", "dgx-a100"], "| dgx-a100 | 15.89 | 12.23 |"),
        (["--topology", "hgx-b200"], "| hgx-b200 | 4.37 | 2.62 |"),
        (["--topology", "gb200-nvl72"], "| gb200-nvl72 (W = 8) | 5.10 | 2.62 |"),
        (["--topology", "pcie-l40s-8"], "| pcie-l40s-8 | 161.5 | 114.7 |"),
        (["--set", "scale_up.bandwidth_GBps=900"],
         "| dgx-h100 `--set scale_up.bandwidth_GBps=900` | 3.80 | 2.62 |"),
    ]
    for args, row in rows:
        assert row in text
        data = json.loads(cli("analyze", "--task", "1", "--format", "json", *args).out)
        numbers = [float(x) for x in row.strip("|").split("|")[-2:]]
        assert data["roofline"]["t_comm_us"] == pytest.approx(numbers[0], abs=0.051)
        assert data["roofline"]["t_comm_line_rate_us"] == pytest.approx(numbers[1], abs=0.051)
