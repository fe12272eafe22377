"""Numbers without bounds, as a new user typed them: NaN, infinities, overflow, 400- and
5,000-digit integers, fractions where counts are meant. Each ends in one line and exit 2,
naming the field and the range; none reaches a traceback or NaN in JSON."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from paths import DATA, ROOT

from pkbsim.bounds import check, parse_number, show
from pkbsim.errors import InfeasibleError, PkbsimError, UsageError
from pkbsim.files import json_text

D400 = "9" * 400
D5000 = "9" * 5000
GRPO = ROOT / "tasks" / "83_vocab_parallel_log_prob_topk_chunked.yaml"
H100 = ROOT / "topologies" / "dgx-h100.yaml"


def one_line(r: Any, *needles: str) -> None:
    assert r.code == 2, (r.code, r.out[-300:], r.err[-300:])
    assert r.err.count("\n") == 1 and r.err.startswith("pkbsim: error: "), r.err
    assert len(r.err) < 600, r.err  # one readable line, not a 5,000-digit echo
    for needle in needles:
        assert needle in r.err, r.err


@pytest.mark.parametrize(("args", "needles"), [
    (["analyze", "-t", "grpo", "--set", "M=nan"], ["--set M", "expected a number"]),
    (["analyze", "-t", "grpo", "--set", "M=inf"], ["--set M"]),
    (["analyze", "-t", "grpo", "--set", "M=1e400"], ["--set M", "finite"]),
    (["analyze", "-t", "grpo", "--set", f"M={D400}"], ["--set M", "at most 40 characters"]),
    (["analyze", "-t", "grpo", "--set", f"M={D5000}"], ["--set M", "(5002 chars)"]),
    (["analyze", "-t", "grpo", "--set", "scale_up.link_bandwidth_GBps=nan"],
     ["scale_up.link_bandwidth_GBps"]),
    (["analyze", "-t", "grpo", "--set", "scale_up.link_bandwidth_GBps=inf"],
     ["scale_up.link_bandwidth_GBps"]),
    (["analyze", "-t", "grpo", "--set", "scale_up.link_bandwidth_GBps=1e400"], ["finite"]),
    (["analyze", "-t", "grpo", "--set", f"scale_up.link_bandwidth_GBps={D5000}"],
     ["at most 40 characters"]),
    (["analyze", "-t", "grpo", "--set", "scale_up.link_bandwidth_GBps=1e9"],
     ["scale_up.link_bandwidth_GBps", "<= 1,000,000", "1000000000"]),
    (["analyze", "-t", "grpo", "--set", "latency.host_launch_us=-3"],
     ["latency.host_launch_us", ">= 0"]),
    (["analyze", "-t", "grpo", "--measured-us", "nan"], ["--measured-us nan", ">= 0.001"]),
    (["analyze", "-t", "grpo", "--measured-us", "inf"], ["--measured-us inf"]),
    (["compare", "-p", "1", "--measured-us", "nan"], ["--measured-us nan"]),
    (["simulate", "-t", "grpo", "--iterations", "100000000"], ["--iterations", "<= 1,000"]),
    (["simulate", "-t", "grpo", "--override", "a2a_logits.chunks=1000000000"],
     ["a2a_logits.chunks", "<= 1,024"]),
    (["simulate", "-t", "grpo", "--override", f"a2a_logits.sms={D5000}"],
     ["a2a_logits.sms", "expected an integer"]),
    (["simulate", "-t", "grpo", "--override", "topk_topp_logprob.mechanism=tma"],
     ["topk_topp_logprob", "compute op"]),
    (["analyze", "-t", "grpo", "-w", "99999999"], ["--world-size 99999999"]),
    (["plan", "threshold", "--collective", "all_reduce", "--fraction", "nan"],
     ["--fraction nan"]),
    (["sweep", "--collective", "all_reduce", "--sizes", "1KiB:1e400:x2", "--jobs", "1"],
     ["finite"]),
    (["sweep", "--collective", "all_reduce", "--sizes", "1KiB:1MiB:x2", "--jobs", "0"],
     ["--jobs 0"]),
])
def test_bad_numbers_in_options(cli, args: list[str], needles: list[str]) -> None:
    one_line(cli(*args), *needles)


def _task(tmp_path: Path, edit: Any, name: str = "task.yaml") -> Path:
    data = yaml.safe_load(GRPO.read_text())
    edit(data)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _first_repeat(value: Any) -> Any:
    def edit(d: dict[str, Any]) -> None:
        d["ops"][0]["repeat"] = value
    return edit


@pytest.mark.parametrize(("edit", "needles"), [
    (lambda d: d["params"]["M"].update(value=float("nan")), ["params.M.value", "nan"]),
    (lambda d: d["params"]["M"].update(value=float("inf")), ["params.M.value", "inf"]),
    (lambda d: d["params"]["M"].update(value=10**400), ["params.M.value", "401 digits"]),
    (lambda d: d["presets"]["pkb"].update(set={"vocab": float("nan")}),
     ["presets.pkb.set.vocab"]),
    (_first_repeat(2.5), ["ops[0].repeat", "expected an integer", "2.5"]),
    (_first_repeat(10**9), ["ops[0].repeat", "<= 10,000,000"]),
    (_first_repeat("n_chunks / 3"), ["ops[0].repeat", "expected an integer"]),
    (_first_repeat("1e308 * 10"), ["ops[0].repeat", "not a finite number"]),
    (_first_repeat("2 ** 64 ** 2"), ["ops[0].repeat"]),
    (lambda d: d["ops"][0].update(elements_per_rank="2 ** 61"),
     ["ops[0].elements_per_rank", "2^60"]),
])
def test_bad_numbers_in_a_task_file(cli, tmp_path: Path, edit: Any,
                                    needles: list[str]) -> None:
    path = _task(tmp_path, edit)
    one_line(cli("analyze", "--task", str(path), "--format", "json"), str(path), *needles)


def test_a_5000_digit_integer_in_yaml(cli, tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text(GRPO.read_text().replace("M: {value: 1024", f"M: {{value: {D5000}"))
    one_line(cli("analyze", "--task", str(path)), str(path), "not valid YAML")


def test_duplicate_yaml_keys(cli, tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text(GRPO.read_text().replace("params:\n", "params:\n  vocab: 3\n", 1))
    one_line(cli("analyze", "--task", str(path)), str(path), "duplicate key 'vocab'", "line")


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf", "1e400", D400])
def test_bad_numbers_in_a_topology_file(cli, tmp_path: Path, value: str) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(H100.read_text().replace("link_bandwidth_GBps: 25",
                                             f"link_bandwidth_GBps: {value}"))
    r = cli("analyze", "-t", "grpo", "--topology", str(path), "--format", "json")
    one_line(r, str(path))
    assert "comm-bound" not in r.out and "NaN" not in r.out


def _results(tmp_path: Path, mutate: Any) -> Path:
    data = json.loads((DATA / "validation" / "synthetic_1gpu.json").read_text())
    mutate(data)
    folder = tmp_path / "run"
    folder.mkdir()
    text = json.dumps(data) if not isinstance(mutate, str) else mutate
    (folder / "results.json").write_text(text)
    return folder


@pytest.mark.parametrize(("text", "needle"), [
    ('{"schema": "pkbsim.validation/1", "x": NaN}', "not JSON"),
    ('{"schema": "pkbsim.validation/1", "x": 1e400}', "not JSON"),
    ('{"schema": "pkbsim.validation/1", "x": ' + D5000 + "}", "not JSON"),
    ("[" * 100_000 + "]" * 100_000, "nested deeper than 100"),
])
def test_bad_results_files(cli, tmp_path: Path, text: str, needle: str) -> None:
    (tmp_path / "results.json").write_text(text)
    one_line(cli("validate", "--report", str(tmp_path), "--base", "dgx-h200"), needle)
    one_line(cli("calibrate", str(tmp_path / "results.json"), "--out", str(tmp_path / "c.yaml")),
             needle)
    assert not (tmp_path / "c.yaml").exists()


def test_a_measurement_out_of_range(cli, tmp_path: Path) -> None:
    def huge(data: dict[str, Any]) -> None:
        data["cases"][0]["measurements"][0]["time_us"] = 1e300

    folder = _results(tmp_path, huge)
    one_line(cli("validate", "--report", str(folder), "--base", "dgx-h200"),
             "measurements[0].time_us", "<= 1,000,000,000,000")


@pytest.mark.parametrize("value", ["NaN", "Infinity", "1e400", D5000, '"1"', "true", "-2"])
def test_bad_pkb_logs(cli, tmp_path: Path, value: str) -> None:
    folder = tmp_path / "logs" / "problem_1_allreduce" / "cuda"
    folder.mkdir(parents=True)
    (folder / "rank_0_perf.json").write_text(f'{{"wall_time_ms": {value}}}')
    one_line(cli("compare", "--measured", str(tmp_path / "logs")), "rank_0_perf.json")


@pytest.mark.parametrize("cell", ["nan", "inf", "1e400", D5000, "-1", "0"])
def test_bad_csv_times(cli, tmp_path: Path, cell: str) -> None:
    path = tmp_path / "times.csv"
    path.write_text(f"problem,variant,time_us\n1,cuda,{cell}\n")
    one_line(cli("compare", "--measured", str(path)), str(path), "time_us")


def test_parse_number_refuses_before_converting() -> None:
    assert parse_number("1_024") == 1024 and parse_number(" 2.5e3 ") == 2500.0
    for text in ("nan", "inf", "-Infinity", "1e400", D5000, "0x10", "", "1,5"):
        with pytest.raises(UsageError):
            parse_number(text)
    assert show(10**5000) == "an integer of 5001 digits"


def test_check_names_the_range() -> None:
    with pytest.raises(UsageError) as info:
        check(2.5, "iterations", field="f")
    assert info.value.one_line() == "f: expected an integer >= 1 and <= 1,000, got 2.5"
    with pytest.raises(UsageError, match=r"got nan"):
        check(math.nan, "GBps", field="f")
    assert check(7, "iterations") == 7 and isinstance(check(7, "iterations"), int)


def test_json_output_never_holds_nan() -> None:
    with pytest.raises(InfeasibleError, match="not a finite number"):
        json_text({"t_us": math.nan})
    with pytest.raises(PkbsimError):
        json_text([math.inf])
    assert json_text({"a": 1.5}) == '{"a": 1.5}'
