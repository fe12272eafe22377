"""Cheap valid calls of every public function of ``import pkbsim``, and values of the wrong
type to put in place of one argument: the API's error contract is that any argument, whatever
its type, either works or raises a PkbsimError (tests/api/test_api_arguments.py tries each,
tests/hostile/test_fuzz.py draws several at once)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
from paths import DATA

import pkbsim

SOLUTION = DATA / "solutions" / "one_shot_cuda.py"
MISSING = Path("missing-folder") / "missing.yaml"  # relative: the tests run in tmp_path

# function -> keyword arguments of a valid call that takes well under a second
BASE: dict[str, dict[str, Any]] = {
    "load_topology": {"name": "dgx-h100"},
    "load_task": {"name": "grpo"},
    "analyze": {"task": "1", "predict": False, "trace_on_demand": False},
    "analyze_all": {"world_size": 8},
    "simulate": {"task": "1", "iterations": 1, "trace_on_demand": False},
    "sweep": {"collective": "all_reduce", "sizes": "1KiB", "jobs": 1},
    "compare": {"problem": "1", "measured_us": 100.0, "simulate_fixes": False,
                "trace_on_demand": False},
    "inspect": {"paths": (SOLUTION,)},
    "record_trace": {"target": "f.py:g", "out": "traces-never-written"},
}

# (paths that no system call takes, 100 kB long or with a NUL, are tests/hostile's)
WRONG: list[Any] = [
    None, 0, -1, 2.5, float("nan"), 10**400, True, "", b"grpo", bytearray(b"x"), [], [1],
    ["a", None], (), {}, {"a": object()}, {1: 2}, {"M": [1]}, object(), print, MISSING,
    PurePosixPath("grpo"), 1j,
]


def functions() -> list[str]:
    return sorted(BASE)


def parameters(name: str) -> list[str]:
    """Every parameter of a public function."""
    return list(inspect.signature(getattr(pkbsim, name)).parameters)


def call(name: str, replaced: dict[str, Any]) -> Any:
    """The base call of ``name`` with the arguments in ``replaced`` swapped in."""
    kwargs = {**BASE[name], **replaced}
    function: Callable[..., Any] = getattr(pkbsim, name)
    if name == "inspect":
        paths = kwargs.pop("paths")
        return function(*(paths if isinstance(paths, tuple) else (paths,)), **kwargs)
    return function(**kwargs)


@pytest.fixture
def no_trace_runs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """record_trace's arguments are checked, but no tracer starts; the current folder is
    tmp_path, so what a call writes (record_trace's programs=, sweep's jsonl=) lands there."""
    from pkbsim.trace import launch

    monkeypatch.setattr(launch, "run_trace", lambda job: [])
    monkeypatch.chdir(tmp_path)
