"""Numbers that are finite but absurd: subnormal bandwidths and times (5e-324 GB/s,
--measured-us 1e-320), fractions of a byte, half a sequence length (--set M=0.5), and results
no machine would take (1e304 us). Each is refused with one line naming the field, at load or
option parsing; a computed time past result_us is an error, never a printed figure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from paths import ROOT

import pkbsim
from pkbsim.bounds import MAX_RESULT_US, QUANTITIES, check_result
from pkbsim.errors import InfeasibleError
from pkbsim.sim import simulate_collective
from pkbsim.topology import load_topology

GRPO = ROOT / "tasks" / "83_vocab_parallel_log_prob_topk_chunked.yaml"
H100 = ROOT / "topologies" / "dgx-h100.yaml"
BW = "scale_up.link_bandwidth_GBps"


def one_line(r: Any, *needles: str) -> None:
    assert r.code == 2, (r.code, r.out[-300:], r.err[-300:])
    assert r.err.count("\n") == 1 and r.err.startswith("pkbsim: error: "), r.err
    assert len(r.err) < 600 and "Traceback" not in r.err, r.err
    for needle in needles:
        assert needle in r.err, r.err


@pytest.mark.parametrize(("args", "needles"), [
    (["analyze", "-t", "grpo", "--measured-us", "1e-320"], ["--measured-us 1e-320", ">= 0.001"]),
    (["compare", "-p", "1", "--measured-us", "1e-320"], ["--measured-us 1e-320", ">= 0.001"]),
    (["analyze", "-t", "grpo", "--set", f"{BW}=5e-324"],
     [BW, "0 or a number >= 0.001", "got 5e-324"]),
    (["analyze", "-t", "grpo", "--set", "gpu.hbm_bandwidth_GBps=1e-320"],
     ["gpu.hbm_bandwidth_GBps", ">= 0.001"]),
    (["analyze", "-t", "grpo", "--set", "gpu.peak_tflops.bf16_tensor=1e-320"],
     ["gpu.peak_tflops.bf16_tensor", ">= 0.001"]),
    (["analyze", "-t", "grpo", "--set", "mechanisms.tma.efficiency=1e-320"],
     ["mechanisms.tma.efficiency", ">= 0.001"]),
    (["analyze", "-t", "grpo", "--set", "M=0.5"], ["--set M", "got 0.5", "M is a whole number"]),
    (["analyze", "-t", "grpo", "--set", "M=1e-320"], ["--set M", "got 1e-320", "whole number"]),
    (["sweep", "--collective", "all_reduce", "--sizes", "1e-320", "--jobs", "1"],
     ["--sizes", "expected a number >= 1", "got 1e-320"]),
    (["sweep", "--collective", "all_reduce", "--sizes", "0.5,1KiB", "--jobs", "1"],
     ["--sizes", "got 0.5"]),
    (["sweep", "--collective", "all_reduce", "--vary", "size=1e-320", "--jobs", "1"],
     ["--vary size", "got 1e-320"]),
    # in range, but the time they give is beyond any machine: refused, not printed
    (["analyze", "-t", "1", "--set", "M=1000000000", "--set", "gpu.hbm_bandwidth_GBps=0.001"],
     ["task 1_allreduce: the roofline's t_memory is 4.1e+12 us", "beyond the 1e+12 us"]),
    (["sweep", "--collective", "all_reduce", "--sizes", "1e18", "--set", f"{BW}=0.001",
      "--jobs", "1"], ["the roofline's t_comm is", "beyond the 1e+12 us"]),
])
def test_absurd_options_are_one_line(cli, args: list[str], needles: list[str]) -> None:
    one_line(cli(*args), *needles)


def test_a_subnormal_link_bandwidth_in_a_topology_file(cli, tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(H100.read_text().replace("link_bandwidth_GBps: 25",
                                             "link_bandwidth_GBps: 5.0e-324"))
    one_line(cli("analyze", "-t", "grpo", "--topology", str(path)),
             f"{path}: {BW}: expected 0 or a number >= 0.001 and <= 1,000,000, got 5e-324")


def _task(tmp_path: Path, edit: Any) -> Path:
    data = yaml.safe_load(GRPO.read_text())
    edit(data)
    path = tmp_path / "task.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.mark.parametrize(("edit", "field", "needle"), [
    (lambda d: d["presets"]["blog-1k"]["set"].update(vocab=0.5), "presets.blog-1k.set.vocab",
     "vocab is a whole number: the task file gives 256"),
    (lambda d: d["ops"][0].update(elements_per_rank="1 / 4"), "ops[0].elements_per_rank",
     "expected 0 or a number >= 1"),
    (lambda d: d["ops"][0].update(elements_per_rank="2.5e-317"), "ops[0].elements_per_rank",
     "got 2.5e-317"),
])
def test_absurd_values_in_a_task_file(cli, tmp_path: Path, edit: Any, field: str,
                                      needle: str) -> None:
    path = _task(tmp_path, edit)
    one_line(cli("analyze", "--task", str(path), "--no-predict"), f"{path}: {field}: ", needle)


def test_whole_and_fractional_parameters() -> None:
    """A parameter written as an integer takes whole numbers (1024.0 is 1024); one written as
    a decimal (top_p: 0.9) takes fractions; a sweep's bad point is that row's error."""
    whole = pkbsim.analyze("grpo", sets={"M": 2048.0}, predict=False).to_dict()["parameters"]
    assert whole["M"] == 2048 and isinstance(whole["M"], int)
    assert pkbsim.analyze("grpo", sets={"top_p": 0.5}, predict=False).result.roofline
    rows = pkbsim.sweep("grpo", vary={"M": [512, 0.5]}, metrics=["t_roof"], jobs=1).rows
    assert rows[0]["error"] is None and "M is a whole number" in rows[1]["error"]


def test_the_ranges_say_zero_or_at_least() -> None:
    assert QUANTITIES["GBps"].describe() == "0 or a number >= 0.001 and <= 1,000,000"
    assert QUANTITIES["bytes"].describe() == "0 or a number >= 1 and <= 2^60"
    assert QUANTITIES["GBps"].admits(0) and QUANTITIES["GBps"].admits(1e-3)
    assert not QUANTITIES["GBps"].admits(9.99e-4) and not QUANTITIES["GBps"].admits(5e-324)


def test_a_result_past_the_bound_is_an_error() -> None:
    assert check_result(1.0, "x") == 1.0
    for seconds in (MAX_RESULT_US * 1.01e-6, 1e298, float("inf"), float("nan")):
        with pytest.raises(InfeasibleError, match="beyond the 1e"):
            check_result(seconds, "t")
    slow = load_topology("dgx-h100", {BW: 0.001})  # 1 MB/s NVLink: 1e18 B takes 31 years
    assert simulate_collective(slow, "all_reduce", 2**20, 8, "ring", "nccl_simple").time_s > 0
    with pytest.raises(InfeasibleError, match=r"one all_reduce call of .* beyond"):
        simulate_collective(slow, "all_reduce", 1e18, 8, "ring", "nccl_simple")
