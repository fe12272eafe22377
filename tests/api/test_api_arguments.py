"""The Python API's error contract (docs/python.md): every argument of every public function,
given a value of the wrong type, either works or raises a PkbsimError; a wrong type is an
ArgumentError naming the argument. Path objects work wherever a file or a name is meant."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from api_calls import MISSING, SOLUTION, WRONG, call, functions, no_trace_runs, parameters
from paths import DATA, ROOT

import pkbsim
from pkbsim.errors import ArgumentError, PkbsimError, TaskError, TopologyError, UsageError

__all__ = ["no_trace_runs"]  # the fixture, imported for pytest


def outcome(name: str, replaced: dict[str, Any]) -> str:
    """``ok`` or the PkbsimError's one line; anything else fails the test."""
    try:
        call(name, replaced)
    except PkbsimError as exc:
        line = exc.one_line()
        assert "\n" not in line and len(line) < 1000, line
        return line
    return "ok"


@pytest.mark.parametrize("name", functions())
def test_every_argument_of_the_wrong_type_is_a_typed_error(name: str, no_trace_runs: None
                                                           ) -> None:
    refused = 0
    for parameter in parameters(name):
        for value in WRONG:
            line = outcome(name, {parameter: value})
            refused += line != "ok"
    assert refused > len(parameters(name)) * len(WRONG) // 2  # most are refused, not all


@pytest.mark.parametrize(("name", "parameter", "value"), [
    ("analyze", "task", 1.5), ("analyze", "predict", "yes"), ("analyze", "sets", [("M", 1)]),
    ("analyze_all", "filters", 3), ("simulate", "overrides", {"ar.chunks": None}),
    ("sweep", "vary", {"world_size": object()}), ("sweep", "metrics", [None]),
    ("compare", "measured", b"logs"), ("inspect", "paths", 7), ("inspect", "shape", [1.5]),
    ("record_trace", "commit", "abc"), ("load_task", "name", None),
    ("load_topology", "name", ["dgx-h100"]),
])
def test_a_wrong_type_names_the_argument(name: str, parameter: str, value: Any,
                                         no_trace_runs: None) -> None:
    with pytest.raises(ArgumentError) as info:
        call(name, {parameter: value})
    assert f"argument {parameter}" in info.value.one_line()
    assert isinstance(info.value, UsageError) and isinstance(info.value, TypeError)


def test_path_objects_are_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    task = ROOT / "tasks" / "83_vocab_parallel_log_prob_topk_chunked.yaml"
    topology = ROOT / "topologies" / "dgx-h100.yaml"
    assert pkbsim.load_task(task).id == 83
    assert pkbsim.load_topology(topology).name == "dgx-h100"
    assert pkbsim.analyze(task, topology=topology, predict=False).to_dict()["task"]["id"] == 83
    assert pkbsim.analyze(83, predict=False).result.instance.spec.id == 83  # an id as an int
    assert pkbsim.inspect(SOLUTION).result[0].error is None
    assert pkbsim.compare(measured=DATA / "pkb_logs" / "logs", simulate_fixes=False).result
    with pytest.raises(TaskError, match="no such file"):
        pkbsim.load_task(MISSING)
    with pytest.raises(TopologyError, match="no such file"):
        pkbsim.load_topology(MISSING)
    # Path("grpo") is the file ./grpo, never the task grpo
    with pytest.raises(TaskError, match="no such file"):
        pkbsim.load_task(Path("grpo"))
    (tmp_path / "grpo").write_bytes(task.read_bytes())
    assert pkbsim.load_task(Path("grpo")).id == 83


class Fspath(os.PathLike[str]):
    """An os.PathLike that is not a pathlib.Path."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __fspath__(self) -> str:
        return str(self.path)


def test_any_path_like_is_a_file() -> None:
    assert pkbsim.load_task(Fspath(ROOT / "tasks" / "1_allreduce.yaml")).id == 1
    assert len(pkbsim.inspect(Fspath(SOLUTION)).result) == 1
