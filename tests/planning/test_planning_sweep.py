"""pkbsim sweep: expansion, parallel = serial, streaming, resume after interruption, the CLI."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from pkbsim.errors import UsageError
from pkbsim.planning import sweep as sweep_module
from pkbsim.planning.axes import Axis, parse_vary
from pkbsim.planning.evaluate import Target, parse_metrics
from pkbsim.planning.sweep import SweepSpec, points, read_results, run_sweep

LINK = "scale_up.link_bandwidth_GBps"


def grpo_spec(bandwidths: str = "10:200:+10") -> SweepSpec:
    """A roofline-only sweep: 3 world sizes x 20 link bandwidths = 60 cheap points."""
    return SweepSpec(Target(task="grpo"), (parse_vary("world_size=2,4,8"),
                                           parse_vary(f"{LINK}={bandwidths}")),
                     parse_metrics(["roofline"]))


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_points_expand_in_order() -> None:
    pts = list(points(grpo_spec()))
    assert len(pts) == 60
    assert pts[0] == {"world_size": 2, LINK: 10}
    assert pts[1] == {"world_size": 2, LINK: 20}
    assert pts[20] == {"world_size": 4, LINK: 10}


def test_parallel_equals_serial(tmp_path: Path) -> None:
    serial = run_sweep(grpo_spec(), None, jobs=1)
    parallel = run_sweep(grpo_spec(), tmp_path / "p.jsonl", jobs=2)
    assert parallel.rows == serial.rows
    assert [{k: r[k] for k in ("world_size", LINK)} for r in serial.rows] == \
        list(points(grpo_spec()))
    assert serial.columns == ["t_comm_us", "t_mem_us", "t_comp_us", "t_latency_us",
                              "t_roof_us", "binding"]
    assert serial.counts.ok == 60 and serial.counts.failed == 0
    assert lines(tmp_path / "p.jsonl")[1:] == serial.rows  # rewritten in point order


def test_streamed_file_has_header_then_rows(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    seen: list[int] = []

    def progress(done: int, total: int) -> None:
        assert total == 60
        seen.append(len(path.read_text().splitlines()) - 1)  # rows on disk when told

    result = run_sweep(grpo_spec(), path, jobs=1, progress=progress)
    records = lines(path)
    assert records[0] == {"pkbsim_sweep": 1, "target": {
        "task": "grpo", "collective": None, "topology": "dgx-h100", "preset": "pkb",
        "host_model": "torch"},
        "axes": [{"name": "world_size", "values": [2, 4, 8]},
                 {"name": LINK, "values": list(range(10, 201, 10))}],
        "metrics": ["t_comm", "t_mem", "t_comp", "t_latency", "t_roof", "binding"]}
    assert records[1:] == result.rows
    assert seen == list(range(61))  # each row is on disk before progress hears of it


def test_bandwidth_scales_t_comm_inversely() -> None:
    """t_comm is bytes over bandwidth: halving the link rate doubles it (the closed form)."""
    rows = run_sweep(grpo_spec("100,200"), None, jobs=1).rows
    by = {(r["world_size"], r[LINK]): r["t_comm_us"] for r in rows}
    for w in (2, 4, 8):
        assert by[(w, 100)] == pytest.approx(2 * by[(w, 200)], rel=1e-12)


def count_evaluations(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    real = sweep_module.evaluate

    def counting(target: Target, point: dict[str, Any], metrics: Any) -> dict[str, Any]:
        calls.append(dict(point))
        return real(target, point, metrics)

    monkeypatch.setattr(sweep_module, "evaluate", counting)
    return calls


def test_resume_computes_only_missing_points(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    fresh = run_sweep(grpo_spec(), None, jobs=1)
    path = tmp_path / "r.jsonl"
    half = [json.dumps(grpo_spec().header())] + [json.dumps(r) for r in fresh.rows[::2]]
    path.write_text("\n".join(half) + "\n" + '{"world_size": 8, "scale_up.li')  # cut by a kill
    calls = count_evaluations(monkeypatch)
    resumed = run_sweep(grpo_spec(), path, jobs=1)
    assert len(calls) == 30
    assert calls == [{k: r[k] for k in ("world_size", LINK)} for r in fresh.rows[1::2]]
    assert resumed.counts.resumed == 30 and resumed.counts.computed == 30
    assert resumed.rows == fresh.rows
    assert lines(path)[1:] == fresh.rows
    calls.clear()
    again = run_sweep(grpo_spec(), path, jobs=2)
    assert calls == [] and again.counts.resumed == 60 and again.rows == fresh.rows


def test_interrupted_sweep_keeps_rows_and_resumes(tmp_path: Path) -> None:
    path = tmp_path / "i.jsonl"
    fresh = run_sweep(grpo_spec(), None, jobs=1)
    for jobs in (1, 2):
        def stop_after_25(done: int, total: int) -> None:
            if done == 25:
                raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            run_sweep(grpo_spec(), path, jobs=jobs, progress=stop_after_25, fresh=True)
        kept, _ = read_results(path, grpo_spec())
        assert len(kept) == 25 and len(lines(path)) == 26  # every line whole JSON
        resumed = run_sweep(grpo_spec(), path, jobs=jobs)
        assert resumed.counts.resumed == 25 and resumed.rows == fresh.rows


def test_unterminated_last_row_is_kept(tmp_path: Path) -> None:
    fresh = run_sweep(grpo_spec(), None, jobs=1)
    path = tmp_path / "u.jsonl"
    path.write_text(json.dumps(grpo_spec().header()) + "\n" + json.dumps(fresh.rows[0]))
    result = run_sweep(grpo_spec(), path, jobs=1)
    assert result.counts.resumed == 1 and result.rows == fresh.rows
    assert len(lines(path)) == 61


def test_corrupt_middle_line_names_file_and_line(tmp_path: Path) -> None:
    fresh = run_sweep(grpo_spec(), None, jobs=1)
    path = tmp_path / "c.jsonl"
    path.write_text("\n".join([json.dumps(grpo_spec().header()), json.dumps(fresh.rows[0]),
                               "garbage", json.dumps(fresh.rows[1])]) + "\n")
    with pytest.raises(UsageError) as info:
        run_sweep(grpo_spec(), path, jobs=1)
    assert info.value.one_line() == f"{path}: line 3: not JSON (fix or delete it, or pass --fresh)"


def test_other_sweep_in_file_needs_fresh(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    run_sweep(grpo_spec("10,20"), path, jobs=1)
    before = path.read_text()
    with pytest.raises(UsageError, match=r"different sweep.*--fresh"):
        run_sweep(grpo_spec(), path, jobs=1)
    assert path.read_text() == before  # untouched
    result = run_sweep(grpo_spec(), path, jobs=1, fresh=True)
    assert result.counts.computed == 60 and len(lines(path)) == 61


def test_unknown_axis_raises_before_the_file_is_touched(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    spec = SweepSpec(Target(task="grpo"), (Axis("foo", (1, 2)),), parse_metrics(["t_roof"]))
    with pytest.raises(UsageError, match="--vary foo"):
        run_sweep(spec, path, jobs=2)
    assert not path.exists()


# The CLI, end to end ------------------------------------------------------------------------

def test_cli_collective_csv(cli: Any) -> None:
    r = cli("sweep", "--collective", "all_reduce", "--sizes", "1KiB:1MiB:x4", "--metric",
            "algbw,busbw", "--format", "csv", "--jobs", "1")
    assert r.code == 0, r.err
    rows = list(csv.DictReader(io.StringIO(r.out)))
    assert list(rows[0]) == ["size", "nccl_reference_algbw_GBps", "nccl_reference_busbw_GBps",
                             "line_rate_busbw_GBps", "error", "not_applicable"]
    assert [int(row["size"]) for row in rows] == [2**10, 2**12, 2**14, 2**16, 2**18, 2**20]
    for row in rows:  # nccl-tests: all-reduce busbw = algbw x 2(n-1)/n, n = 8
        assert float(row["nccl_reference_busbw_GBps"]) == pytest.approx(
            float(row["nccl_reference_algbw_GBps"]) * 2 * 7 / 8, rel=1e-9)
        assert row["error"] == ""


def test_cli_table_json_and_parallel(cli: Any) -> None:
    args = ("sweep", "--task", "grpo", "--vary", "world_size=2,4", "--vary",
            f"{LINK}=100,200", "--metric", "t_roof,binding")
    table = cli(*args)
    assert table.code == 0 and "t_roof_us" in table.out and "latency" in table.out
    one = json.loads(cli(*args, "--format", "json", "--jobs", "1").out)
    two = json.loads(cli(*args, "--format", "json", "--jobs", "2").out)
    assert one == two
    assert one["schema"] == "pkbsim.sweep/1" and one["columns"] == ["t_roof_us", "binding"]
    assert [(r["world_size"], r[LINK]) for r in one["rows"]] == [(2, 100), (2, 200), (4, 100),
                                                                 (4, 200)]


def test_cli_plot_png(cli: Any, tmp_path: Path) -> None:
    png = tmp_path / "x.png"
    r = cli("sweep", "--collective", "all_reduce", "--sizes", "1KiB:64KiB:x4", "--vary",
            "topology=dgx-h100,hgx-b200", "--metric", "busbw", "--plot", str(png))
    assert r.code == 0, r.err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_out_streams_and_resumes(cli: Any, tmp_path: Path) -> None:
    out, jsonl = tmp_path / "s.csv", tmp_path / "s.jsonl"
    args = ("sweep", "--task", "grpo", "--vary", f"{LINK}=100:400:+100", "--metric", "t_roof",
            "--out", str(out))
    assert cli(*args).code == 0
    assert len(out.read_text().splitlines()) == 5
    assert not (tmp_path / "s.csv.partial.jsonl").exists()  # removed once --out is written
    assert cli(*args, "--jsonl", str(jsonl)).code == 0
    assert len(lines(jsonl)) == 5
    again = cli(*args[:-2], "--jsonl", str(jsonl))
    assert "4 read back from an earlier run" in again.out


@pytest.mark.parametrize(("args", "message"), [
    (("--task", "grpo", "--vary", "foo=1"), "--vary foo: not a task parameter"),
    (("--task", "grpo", "--vary", "world_size=3,5", "--metric", "t_roof"),
     "every point failed (2); the first: task 83_"),
    (("--task", "grpo", "--sizes", "1KiB:2KiB:x2"), "--sizes works with --collective"),
    (("--collective", "all_reduce", "--sizes", "1KiB:2KiB:x2", "--plot", "a.gif"),
     "--plot a.gif: expected a file ending in .png"),
    (("--collective", "all_reduce", "--sizes", "1KiB:4KiB:x2", "--plot", "a.png", "--x",
      "bogus"), "--x bogus: not an axis"),
    (("--collective", "all_reduce", "--sizes", "1KiB", "--set", "size=2"),
     "--vary size: given twice"),
    (("--collective", "all_gather",), "nothing to sweep"),
    (("--collective", "all_reduce", "--sizes", "1KiB", "--metric", "speed"), "--metric speed"),
])
def test_cli_errors_are_one_line(cli: Any, args: tuple[str, ...], message: str) -> None:
    r = cli("sweep", *args)
    assert r.code == 2
    assert r.err.count("\n") == 1 and r.err.startswith("pkbsim: error: ")
    assert message in r.err


def test_a_task_axis_sweeps_several_tasks_without_task_option() -> None:
    from typer.testing import CliRunner

    from pkbsim.cli import app
    from pkbsim.planning.evaluate import Target, evaluate

    got = CliRunner().invoke(app, ["sweep", "--vary", "task=1,40", "--metric", "t_roof",
                                   "--format", "csv", "--jobs", "1"])
    assert got.exit_code == 0, got.output
    lines = got.output.strip().splitlines()
    assert lines[0] == "task,t_roof_us,error,not_applicable"
    for line, task in zip(lines[1:], ("1", "40"), strict=True):
        want = evaluate(Target(task=task), {}, ("t_roof",))["t_roof_us"]
        assert line.split(",")[0] == task and float(line.split(",")[1]) == pytest.approx(
            want, rel=1e-9)


def test_baseline_adds_exact_speedups_and_booleans_reach_the_topology(cli: Any) -> None:
    got = cli("sweep", "--task", "1", "--vary", "scale_up.bandwidth_GBps=450,900", "--metric",
              "t_comm", "--baseline", "scale_up.bandwidth_GBps=450", "--format", "csv",
              "--jobs", "1")
    assert got.code == 0, got.err
    rows = [line.split(",") for line in got.out.strip().splitlines()]
    assert rows[0] == ["scale_up.bandwidth_GBps", "t_comm_us", "t_comm_speedup", "error",
                       "not_applicable"]
    assert float(rows[1][2]) == 1.0
    assert float(rows[2][2]) == float(rows[1][1]) / float(rows[2][1]) == 2.0  # t_comm ~ 1/B
    bad = cli("sweep", "--task", "1", "--vary", "world_size=4,8", "--baseline", "world_size=16")
    assert bad.code == 2 and "--baseline" in bad.err and len(bad.err.strip().splitlines()) == 1
    nvls = cli("sweep", "--task", "1", "--vary", "scale_up.in_switch_reduction=true,false",
               "--metric", "t_comm", "--format", "csv", "--jobs", "1")
    assert nvls.code == 0, nvls.err
    on, off = (float(line.split(",")[1]) for line in nvls.out.strip().splitlines()[1:])
    assert on < off  # all-reduce with in-switch reduction needs fewer bytes on the busiest port


def test_baseline_summary_line_in_the_table(cli: Any) -> None:
    got = cli("sweep", "--task", "1", "--vary", "scale_up.bandwidth_GBps=450,900,1800",
              "--metric", "t_comm", "--baseline", "scale_up.bandwidth_GBps=450", "--jobs", "1")
    assert got.code == 0, got.err
    assert ("t_comm_speedup against scale_up.bandwidth_GBps=450: median 3.00x over 2 rows "
            "(2.00x to 4.00x); >= 1.8x in 2, < 1.1x in 0") in got.out


@pytest.mark.slow
def test_sigterm_stops_parent_and_workers_and_keeps_the_file(tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    jsonl = tmp_path / "slow.jsonl"
    # custom_best at 64 ranks over InfiniBand takes over a minute a point: still running at the kill
    cmd = [sys.executable, "-m", "pkbsim", "sweep", "--task", "40", "--topology",
           "h100-ib-2node", "--set", "node.count=16", "--preset", "production", "--vary",
           "world_size=8,64,128", "--metric", "custom_best", "--jobs", "2", "--jsonl", str(jsonl)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (jsonl.exists() and
                                               len(jsonl.read_text().splitlines()) >= 2):
        time.sleep(0.2)
    time.sleep(1.0)  # the pool is up, its workers inside a long point
    os.killpg(proc.pid, signal.SIGTERM)  # as a job controller or pkill: parent and workers
    try:
        _out, err = proc.communicate(timeout=20)  # hung before the fix
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    assert proc.returncode != 0 and "resume" in err
    left = subprocess.run(["pgrep", "-f", str(jsonl)], capture_output=True, text=True)
    assert left.stdout.strip() == "", "workers outlived the sweep"
    lines = jsonl.read_text().splitlines()
    assert json.loads(lines[0])["pkbsim_sweep"] == 1 and len(lines) >= 2
    assert all(json.loads(line) for line in lines)


# ---------------------------------------------------------------- points that do not apply

def production_spec(tasks: str) -> SweepSpec:
    return SweepSpec(Target(task="1", preset="production"), (parse_vary(f"task={tasks}"),),
                     parse_metrics(["t_roof"]))


def test_a_preset_a_task_lacks_is_not_applicable_not_a_failure(tmp_path: Path) -> None:
    """Task 23 has no production preset: its point is counted apart, never as a failure
    (issue 30: the README's sweep said "18 of 174 points failed")."""
    from pkbsim.planning.request import failures, not_applicable_note
    from pkbsim.report.sweep_report import render_csv, render_table, to_dict

    result = run_sweep(production_spec("1,23"), tmp_path / "s.jsonl", jobs=1)
    assert (result.counts.ok, result.counts.failed, result.counts.not_applicable) == (1, 0, 1)
    row = result.rows[1]
    assert "error" not in row and "no production preset" in row["not_applicable"]
    assert failures(result) is None
    assert not_applicable_note(result) == (
        "pkbsim: 1 of 2 points not applicable (a preset the task does not define; see the "
        "not_applicable column); not failures")
    assert to_dict(result)["counts"]["not_applicable"] == 1
    assert "1 ok, 0 failed, 1 not applicable" in render_table(result)
    assert list(csv.DictReader(io.StringIO(render_csv(result))))[1]["error"] == ""
    resumed = run_sweep(production_spec("1,23"), tmp_path / "s.jsonl", jobs=1)
    assert resumed.counts.not_applicable == 1 and resumed.counts.resumed == 2


def test_cli_sweep_with_a_missing_preset_exits_0_without_failures(cli: Any) -> None:
    r = cli("sweep", "--vary", "task=1,23", "--preset", "production", "--metric", "t_roof")
    assert r.code == 0, r.err
    assert "failed (see the error column)" not in r.err and "1 of 2 points not applicable" in r.err
    assert "not_applicable" in r.out and "error" not in r.out.split("\n")[3]


def test_no_point_applies_is_an_error(cli: Any) -> None:
    r = cli("sweep", "--vary", "task=23,60", "--preset", "production", "--metric", "t_roof")
    assert r.code == 2 and r.err.count("\n") == 1
    assert "no point applies (2); the first: task 23_grad_acc_loss has no production" in r.err


def test_a_mistyped_preset_is_named_with_a_suggestion(cli: Any) -> None:
    r = cli("analyze", "--task", "1", "--preset", "prodution")
    assert r.code == 2 and "did you mean 'production'?" in r.err
