"""The Python API (pkbsim.api, exported by ``import pkbsim``): its public names, each call
equal to its command's ``--format json``, the tables as data frames, typed errors, and an
``import pkbsim`` that loads nothing heavy."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from paths import DATA, ROOT

import pkbsim
from pkbsim.errors import InfeasibleError, PkbsimError, TaskError, TopologyError, UsageError

# Every public name of ``import pkbsim``. Adding one is fine (add it here too); removing or
# renaming one breaks scripts and notebooks, and this test.
PUBLIC = [
    "__version__",
    "analyze", "analyze_all", "simulate", "sweep", "compare", "inspect", "record_trace",
    "load_topology", "load_task",
    "Report", "AnalysisReport", "OverviewReport", "SimulationReport", "SweepReport",
    "ComparisonReport", "InspectionReport", "TraceReport",
    "PkbsimError", "TaskError", "TopologyError", "UsageError", "InfeasibleError",
    "ExpressionError", "ArgumentError",
]
COMMANDS = ["analyze", "analyze_all", "simulate", "sweep", "compare", "inspect",
            "record_trace", "load_topology", "load_task"]
LOGS = DATA / "pkb_logs" / "logs"
SOLUTION = DATA / "solutions" / "one_shot_cuda.py"
TASKS = ["grpo", "1", "gemm_rs", "moe_a2a", "ln_backward"]  # primitive, TP/SP, EP, DP/SP
HEAVY = {"numpy", "scipy", "simpy", "typer", "rich", "matplotlib", "pandas", "yaml", "torch",
         "dask"}


def cli_json(cli: Any, *args: str) -> dict[str, Any]:
    r = cli(*args, "--format", "json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert isinstance(data, dict)
    return data


# ---------------------------------------------------------------- the names


def test_public_names_are_exported_with_docstrings() -> None:
    assert sorted(PUBLIC) == sorted(set(PUBLIC))
    missing = [name for name in PUBLIC if name not in pkbsim.__all__]
    assert missing == []
    for name in PUBLIC[1:]:
        value = getattr(pkbsim, name)
        assert (value.__doc__ or "").strip(), name
        assert name in dir(pkbsim)
    assert isinstance(pkbsim.__version__, str)


def test_each_command_names_its_cli_counterpart() -> None:
    from pkbsim import api

    for name in COMMANDS:
        assert "pkbsim " in (getattr(api, name).__doc__ or ""), name
    assert "pkbsim compare" in (api.compare.__doc__ or "")


def test_unknown_names_are_attribute_errors() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        pkbsim.no_such_name  # type: ignore[attr-defined]  # noqa: B018


def test_compare_is_the_api_function_whichever_was_imported_first() -> None:
    """The comparator's package has its own name, so no import can shadow the function."""
    for first in ("pkbsim.comparator.comparison", "pkbsim.api", "pkbsim.cli"):
        code = (f"import {first}, pkbsim, pkbsim.api; "
                "assert pkbsim.compare is pkbsim.api.compare, pkbsim.compare")
        subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


# ---------------------------------------------------------------- equal to the CLI


@pytest.mark.parametrize("task", TASKS)
def test_analyze_equals_the_cli(cli, task: str) -> None:
    api = pkbsim.analyze(task)
    assert api.to_dict() == cli_json(cli, "analyze", "--task", task)
    assert api.to_text() == cli("analyze", "--task", task).out


def test_analyze_with_options_equals_the_cli(cli) -> None:
    api = pkbsim.analyze("grpo", topology="gb200-nvl72", world_size=16, preset="production",
                         sets={"scale_up.link_bandwidth_GBps": 50, "vocab": 512},
                         measured_us=30.0, predict=False)
    assert api.to_dict() == cli_json(
        cli, "analyze", "--task", "grpo", "--topology", "gb200-nvl72", "-w", "16", "--preset",
        "production", "--set", "scale_up.link_bandwidth_GBps=50", "--set", "vocab=512",
        "--measured-us", "30", "--no-predict")
    assert api.t_roof_us == api.to_dict()["roofline"]["t_roof_us"]
    assert api.binding == api.to_dict()["roofline"]["binding"]


def test_analyze_all_equals_the_cli(cli) -> None:
    api = pkbsim.analyze_all(world_size=8, filters=["parallelism=EP"], sort="t_roof",
                             reverse=True, sets={"scale_up.link_bandwidth_GBps": 450})
    args = ["analyze", "--all", "-w", "8", "--filter", "parallelism=EP", "--sort", "t_roof",
            "--reverse", "--set", "scale_up.link_bandwidth_GBps=450"]
    assert api.to_dict() == cli_json(cli, *args)
    assert api.to_text() == cli(*args).out
    assert api.to_csv() == cli(*args, "--format", "csv").out


@pytest.mark.parametrize("strategy", ["nccl_reference", "custom_best"])
def test_simulate_equals_the_cli(cli, strategy: str) -> None:
    api = pkbsim.simulate("grpo", strategy=strategy)
    assert api.to_dict() == cli_json(cli, "simulate", "--task", "grpo", "--strategy", strategy)
    assert api.to_text() == cli("simulate", "--task", "grpo", "--strategy", strategy).out
    assert api.predicted_us == api.to_dict()["predicted_us"]


def test_simulate_with_options_equals_the_cli(cli, tmp_path: Path) -> None:
    api = pkbsim.simulate("gemm_rs", topology="gb200-nvl72", world_size=16,
                          sets={"scale_up.link_bandwidth_GBps": 100},
                          overrides={"rs.sms": 16}, iterations=2,
                          reference_model="task", trace=True)
    op = api.result.ops[0].id
    assert api.to_dict() == cli_json(
        cli, "simulate", "--task", "gemm_rs", "--topology", "gb200-nvl72", "-w", "16", "--set",
        "scale_up.link_bandwidth_GBps=100", "--override", "rs.sms=16",
        "--iterations", "2", "--reference-model", "task")
    assert op
    out = tmp_path / "t.json"
    assert cli("simulate", "--task", "gemm_rs", "--topology", "gb200-nvl72", "-w", "16",
               "--set", "scale_up.link_bandwidth_GBps=100", "--override",
               "rs.sms=16", "--iterations", "2", "--reference-model", "task",
               "--trace", str(out)).code == 0
    assert json.loads(api.chrome_trace()) == json.loads(out.read_text())
    assert api.gantt("svg").startswith(b"<?xml")


def test_simulate_a_trace_file_equals_the_cli(cli, tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location(
        "trace_program_tests", ROOT / "tests" / "trace" / "test_program.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    path = tmp_path / "t.json"
    path.write_text(json.dumps(module.TRACE))
    api = pkbsim.simulate(trace_file=path, topology="gb200-nvl72", world_size=8)
    assert api.to_dict() == cli_json(cli, "simulate", "--trace-file", str(path), "--topology",
                                     "gb200-nvl72", "-w", "8")


def test_simulate_a_collective_equals_the_cli_sweep(cli) -> None:
    api = pkbsim.simulate(collective="all_reduce", size="1MiB", world_size=4)
    assert isinstance(api, pkbsim.SweepReport)
    assert api.to_dict() == cli_json(cli, "sweep", "--collective", "all_reduce", "--sizes",
                                     "1MiB", "-w", "4", "--jobs", "1")
    (row,) = api.rows
    assert row["size"] == 2**20 and row["nccl_reference_us"] > 0


def test_sweep_equals_the_cli(cli) -> None:
    api = pkbsim.sweep("grpo", vary={"scale_up.link_bandwidth_GBps": [225, 450, 900],
                                     "world_size": "4,8"},
                       metrics=["t_roof", "nccl_reference"], jobs=1,
                       baseline="scale_up.link_bandwidth_GBps=450")
    args = ["sweep", "--task", "grpo", "--vary", "scale_up.link_bandwidth_GBps=225,450,900",
            "--vary", "world_size=4,8", "--metric", "t_roof,nccl_reference", "--jobs", "1",
            "--baseline", "scale_up.link_bandwidth_GBps=450"]
    assert api.to_dict() == cli_json(cli, *args)
    assert api.to_text() == cli(*args).out
    assert api.to_csv() == cli(*args, "--format", "csv").out
    assert api.notes and api.warning is None
    assert api.plot(fmt="svg").startswith(b"<?xml")


def test_sweep_streams_to_jsonl_and_resumes(tmp_path: Path) -> None:
    stream = tmp_path / "points.jsonl"
    seen: list[tuple[int, int]] = []
    first = pkbsim.sweep(collective="all_gather", sizes="1KiB:4KiB:x2", jsonl=stream, jobs=1,
                         progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (3, 3) and len(stream.read_text().splitlines()) == 4
    again = pkbsim.sweep(collective="all_gather", sizes="1KiB:4KiB:x2", jsonl=stream, jobs=1)
    assert again.result.counts.resumed == 3
    assert again.rows == first.rows


def test_sweep_of_tasks_and_some_failing_points() -> None:
    report = pkbsim.sweep(vary={"task": ["grpo", "1"], "world_size": [8, 4096]},
                          metrics=["t_roof"], jobs=1)
    assert report.warning is not None and "2 of 4 points failed" in report.warning
    with pytest.raises(InfeasibleError, match="every point failed"):
        pkbsim.sweep("grpo", vary={"world_size": [4096]}, metrics=["t_roof"], jobs=1)


def test_compare_equals_the_cli(cli) -> None:
    api = pkbsim.compare(measured=LOGS, simulate_fixes=True)
    assert api.to_dict() == cli_json(cli, "compare", "--measured", str(LOGS))
    assert api.to_text() == cli("compare", "--measured", str(LOGS)).out
    one = pkbsim.compare("allreduce", measured_us=40.0, solution=SOLUTION)
    assert one.to_dict() == cli_json(cli, "compare", "--problem", "allreduce",
                                     "--measured-us", "40", "--solution", str(SOLUTION))


def test_inspect_equals_the_cli(cli) -> None:
    folder = DATA / "solutions"
    api = pkbsim.inspect(SOLUTION, folder, world_size=4, shape=(512, 512))
    args = ["inspect", str(SOLUTION), str(folder), "-w", "4", "--shape", "512x512"]
    assert api.to_dict() == cli_json(cli, *args)
    assert api.to_text() == cli(*args).out
    assert api.failed == []


def test_inspect_with_a_run_log_equals_the_cli(cli) -> None:
    runs = DATA / "run_profiles"
    api = pkbsim.inspect(DATA / "solutions" / "nccl_allreduce.py", run_log=runs)
    assert api.to_dict() == cli_json(cli, "inspect", str(DATA / "solutions" /
                                                      "nccl_allreduce.py"),
                                     "--run-log", str(runs))


def test_sweep_with_fixed_values_equals_the_cli(cli) -> None:
    api = pkbsim.sweep(collective="all_gather", sizes="1KiB,1MiB", world_size=4,
                       sets={"scale_up.bandwidth_GBps": 900, "algorithm": "ring"},
                       metrics=["nccl_reference", "busbw"], host_model="torch", jobs=1)
    assert api.to_dict() == cli_json(
        cli, "sweep", "--collective", "all_gather", "--sizes", "1KiB,1MiB", "-w", "4",
        "--set", "scale_up.bandwidth_GBps=900", "--set", "algorithm=ring", "--metric",
        "nccl_reference,busbw", "--host-model", "torch", "--jobs", "1")


def test_defaults_are_the_cores() -> None:
    from pkbsim import api
    from pkbsim.topology.loader import DEFAULT_TOPOLOGY

    assert api.DEFAULT_TOPOLOGY == DEFAULT_TOPOLOGY  # kept apart so that the API loads light


def test_loaders() -> None:
    topo = pkbsim.load_topology("dgx-h100", sets={"scale_up.link_bandwidth_GBps": 50})
    assert topo.name == "dgx-h100"
    assert topo.scale_up.link_bandwidth_GBps == 50
    assert pkbsim.load_task("grpo").id == 83


# ---------------------------------------------------------------- data frames


def test_tables_as_data_frames() -> None:
    pytest.importorskip("pandas")
    df = pkbsim.sweep(collective="all_reduce", sizes="1KiB,1MiB", jobs=1).to_pandas()
    assert list(df["size"]) == [1024, 2**20]
    assert "nccl_reference_us" in df.columns and "error" in df.columns
    ov = pkbsim.analyze_all(filters=["id=1-3"]).to_pandas()
    assert list(ov["id"]) == [1, 2, 3]
    comp = pkbsim.compare(measured=LOGS, simulate_fixes=False).to_pandas()
    assert {"problem", "variant", "attainment", "top_cause"} <= set(comp.columns)
    assert len(comp) == sum(len(p["variants"]) for p in pkbsim.compare(
        measured=LOGS, simulate_fixes=False).to_dict()["problems"])


def test_simulation_report_as_a_data_frame() -> None:
    """One row per op, as the other reports' tables (issue 30: SimulationReport had none)."""
    pytest.importorskip("pandas")
    report = pkbsim.simulate("grpo")
    df = report.to_pandas()
    ops = report.to_dict()["ops"]
    assert list(df["id"]) == [op["id"] for op in ops] == ["seg0", "seg1", "seg2"]
    assert list(df["gpu_us"]) == [op["gpu_us"] for op in ops]
    assert list(df["end_us"]) == [op["end_us"] for op in ops]
    assert list(df["how_algorithm"][:2]) == [op["how"]["algorithm"] for op in ops[:2]]
    assert df["how_algorithm"].isna().tolist() == [op["how"] is None for op in ops]


def test_to_pandas_without_pandas_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas raises ImportError
    report = pkbsim.sweep(collective="all_reduce", sizes="1KiB", jobs=1)
    with pytest.raises(UsageError, match=r"pkbsim\[frames\]"):
        report.to_pandas()


# ---------------------------------------------------------------- typed errors


@pytest.mark.parametrize(("call", "error"), [
    (lambda: pkbsim.analyze("no-such-task"), UsageError),  # a name: see pkbsim tasks list
    (lambda: pkbsim.analyze(str(DATA / "no_such_task.yaml")), TaskError),
    (lambda: pkbsim.load_task(str(DATA / "pkb_logs" / "times.csv")), TaskError),
    (lambda: pkbsim.analyze("grpo", topology="no-such-topology"), TopologyError),
    (lambda: pkbsim.analyze("grpo", topology=str(DATA / "no_such.yaml")), TopologyError),
    (lambda: pkbsim.analyze("grpo", world_size=0), UsageError),
    (lambda: pkbsim.analyze("grpo", sets={"no_such_param": 1}), PkbsimError),
    (lambda: pkbsim.analyze("grpo", sets={"vocab": [1]}), UsageError),  # type: ignore[dict-item]
    (lambda: pkbsim.sweep("grpo", vary={"world_size": [8]}, sets={"vocab": "1,2"}),
     UsageError),
    (lambda: pkbsim.analyze_all(sets={"vocab": 2}), UsageError),
    (lambda: pkbsim.simulate("grpo", strategy="fastest"), UsageError),
    (lambda: pkbsim.simulate(), UsageError),
    (lambda: pkbsim.simulate("grpo", collective="all_reduce", size=1), UsageError),
    (lambda: pkbsim.simulate(collective="all_reduce"), UsageError),
    (lambda: pkbsim.simulate(collective="all_reduce", size=1, strategy="custom_best"),
     UsageError),
    (lambda: pkbsim.simulate("grpo", host_model="torch"), UsageError),
    (lambda: pkbsim.sweep("grpo"), UsageError),
    (lambda: pkbsim.sweep("grpo", vary={"world_size": [8]}, jobs=0), UsageError),
    (lambda: pkbsim.sweep("grpo", vary={"world_size": [8]}, executor="mpi"), UsageError),
    (lambda: pkbsim.sweep("grpo", vary={"world_size": [8]}, scheduler="tcp://x:1"),
     UsageError),
    (lambda: pkbsim.compare(), UsageError),
    (lambda: pkbsim.compare(measured_us=3.0), UsageError),
    (lambda: pkbsim.compare(measured=LOGS, solution=SOLUTION), UsageError),
    (lambda: pkbsim.compare("1", measured_us=3.0, solution=SOLUTION, solutions=DATA),
     UsageError),
    (lambda: pkbsim.compare(measured=LOGS, solutions=SOLUTION), UsageError),
    (lambda: pkbsim.inspect(), UsageError),
    (lambda: pkbsim.inspect(SOLUTION, shape="big"), UsageError),
    (lambda: pkbsim.inspect(SOLUTION, dtype="int3"), UsageError),
    (lambda: pkbsim.inspect(SOLUTION, world_size=0), UsageError),
    (lambda: pkbsim.inspect(DATA / "no_such.py"), PkbsimError),
    (lambda: pkbsim.record_trace(), UsageError),
    (lambda: pkbsim.record_trace("f.py:g", mode="guess"), UsageError),
    (lambda: pkbsim.record_trace(pkb_root=DATA), UsageError),
    (lambda: pkbsim.record_trace(pkb_root=DATA, task="1", sets={"K": 3}), UsageError),
])
def test_bad_input_raises_a_typed_error(call: Any, error: type[PkbsimError]) -> None:
    with pytest.raises(error):
        call()


# ---------------------------------------------------------------- traces


def test_trace_report_renders_as_the_cli(tmp_path: Path) -> None:
    from pkbsim.trace.launch import TraceOutcome

    report = pkbsim.TraceReport((TraceOutcome("a.py:f", "ok", seconds=1.25,
                                              path=tmp_path / "a.json"),
                                 TraceOutcome("a.py:g", "error", "boom", 0.5)), ("wrote x",))
    assert report.to_text() == (f"a.py:f: ok (1.2 s) {tmp_path / 'a.json'}\n"
                                "a.py:g: error (0.5 s): boom\nwrote x\n")
    assert not report.ok
    assert report.to_dict()["targets"][1] == {"target": "a.py:g", "status": "error",
                                              "error": "boom", "seconds": 0.5, "path": None}


def test_trace_of_every_reference_asks_the_checkout(monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    from pkbsim import api
    from pkbsim.trace import launch

    jobs: list[Any] = []
    monkeypatch.setattr(launch, "run_trace", lambda job: jobs.append(job) or [])
    report = api.record_trace(pkb_root=tmp_path, task="all", sets={"M": 64}, out=tmp_path,
                              commit=lambda root: "abc123")
    assert report.ok and report.to_text() == "\n"
    assert jobs[0].problems == () and jobs[0].rows == 64 and jobs[0].pkb_commit == "abc123"
    api.record_trace(pkb_root=tmp_path, task="grpo,1", out=tmp_path)
    assert jobs[1].problems == (83, 1)
    api.record_trace(f"{tmp_path / 'f.py'}:g", sets={"m": 8}, out=tmp_path,
                     programs=tmp_path / "programs")
    assert jobs[2].sets == ("m=8",)


# ---------------------------------------------------------------- a cheap import


def test_import_pkbsim_loads_nothing_heavy() -> None:
    code = ("import sys, pkbsim; pkbsim.__version__; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & set(sys.argv[1:])))")
    done = subprocess.run([sys.executable, "-c", code, *sorted(HEAVY)], capture_output=True,
                          text=True, check=True, timeout=120)
    assert done.stdout.strip() == "[]"
