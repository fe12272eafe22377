"""A standing fuzz test: the CLI driven with hostile option values, and with topology, task,
results and log files that have one field replaced by a hostile value. Every outcome must be
exit 0 with valid output (JSON that any parser reads), or exit 2 with one line on stderr: never
a traceback, a hang, or NaN in JSON. The Python API is driven the same way: any function with
some arguments replaced by values of the wrong type must return or raise a PkbsimError.

About a minute in all, marked slow: .ci/run runs it with the other slow tests. Deterministic
(hypothesis' derandomize) unless PKBSIM_FUZZ_RANDOM=1, which draws new examples;
PKBSIM_FUZZ_EXAMPLES=N runs N per test (1,000 each passed on 2026-12-03, random).
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import yaml
from api_calls import WRONG, call, functions, no_trace_runs, parameters
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from paths import DATA, ROOT

from pkbsim.errors import PkbsimError

__all__ = ["no_trace_runs"]  # the fixture, imported for pytest

EXAMPLES = int(os.environ.get("PKBSIM_FUZZ_EXAMPLES", "0"))
SETTINGS = settings(deadline=None, derandomize=not os.environ.get("PKBSIM_FUZZ_RANDOM"),
                    suppress_health_check=list(HealthCheck), database=None)
HANG_S = 60  # one command past this is a hang

NUMBERS = ["nan", "inf", "-inf", "NaN", "1e400", "-1e400", "-1", "0", "1", "2", "8", "2.5",
           "1e-300", "1e300", "9" * 41, "9" * 400, "9" * 5000, "0x10", "1_0", "-0"]
TEXTS = ["", " ", "abc", "[/x]", "[bold]b", "-", "/dev/null", "1KiB", "x2", "1:2:3", "a=b",
         "\x00", "é", "ops", "..", "\n"]
HOSTILE_VALUES: list[Any] = [
    float("nan"), float("inf"), -float("inf"), -1, 0, 2.5, 1e300, 10**30, -(10**30), True,
    None, "x", "", [], {}, [1, 2], {"a": 1}, "1e400", "W / 0", "2 ** 4000", "nan", 10**400]
FORMATS = ["table", "json", "csv", "markdown", "html", "xml"]

# command -> the options it is fuzzed with (flag, values drawn from)
COMMANDS: dict[str, tuple[list[str], list[tuple[str, list[str]]]]] = {
    "analyze": (["analyze", "-t", "grpo", "--no-predict"], [
        ("-w", NUMBERS), ("--measured-us", NUMBERS), ("--format", FORMATS),
        ("--preset", ["pkb", "production", "blog-16k", *TEXTS]),
        ("--set", [f"{k}={v}" for k in ("M", "vocab", "scale_up.link_bandwidth_GBps",
                                        "latency.host_launch_us", "gpu.sm_count",
                                        "mechanisms.tma.efficiency", "nope", "")
                   for v in ("nan", "1e400", "9" * 5000, "-1", "0", "2.5", "true", "x")]),
        ("--topology", ["dgx-h100", "gb200-nvl72", "pcie-l40s-8", *TEXTS])]),
    "simulate": (["simulate", "-t", "1"], [
        ("-w", NUMBERS), ("--iterations", NUMBERS), ("--format", FORMATS),
        ("--override", [f"ar.{k}={v}" for k in ("chunks", "sms", "mechanism", "algorithm",
                                                 "protocol", "warp")
                        for v in ("nan", "0", "1", "1000000000", "9" * 5000, "tma", "[/x]")]),
        ("--strategy", ["nccl_reference", "custom_best", *TEXTS])]),
    "sweep": (["sweep", "--collective", "all_reduce", "--jobs", "1"], [
        ("--sizes", ["1KiB:4KiB:x2", "1:1TiB:+1", "1KiB:1GiB:x1.0000001", "1e400:1:x2",
                     "4KiB:1KiB:x2", *NUMBERS[:6], *TEXTS]),
        ("--vary", ["world_size=2,4", "world_size=0", "world_size=nan", "size=1,nan",
                    "chunks=1,9999", "scale_up.link_bandwidth_GBps=1e400", *TEXTS]),
        ("--metric", ["t_roof", "busbw", "x", ""]), ("--format", FORMATS),
        ("--jobs", NUMBERS)]),
    "plan": (["plan", "threshold", "--collective", "all_reduce", "--sizes", "1KiB:64KiB"], [
        ("--fraction", NUMBERS), ("-w", NUMBERS), ("--sizes", ["1:2", "1e400:1", *TEXTS]),
        ("--format", FORMATS)]),
    "tasks": (["tasks", "show", "grpo"], [("-w", NUMBERS), ("--preset", TEXTS)]),
    "inspect": (["inspect", str(DATA / "solutions" / "one_shot_cuda.py")],
                [("--format", FORMATS), ("--out", ["/dev/null", "-", "/nonexistent/x"])]),
}


@contextmanager
def no_hang(seconds: int = HANG_S) -> Iterator[None]:
    def hung(signum: int, frame: object) -> None:
        raise TimeoutError(f"a pkbsim command ran past {seconds} s")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def check_outcome(r: Any, args: list[str]) -> None:
    """Exit 0 with valid output, or exit 2 with one line."""
    assert r.code in (0, 2), (args, r.code, r.err[-500:])
    assert "Traceback" not in r.err, (args, r.err[-2000:])
    if r.code == 2:
        assert r.err.count("\n") == 1 and r.err.startswith("pkbsim: error: "), (args, r.err)
        assert len(r.err) < 1000, (args, r.err[:300])
        return
    formats = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--format"]
    if formats and formats[-1] == "json" and r.out.strip():
        json.loads(r.out, parse_constant=_no_constant)  # NaN or Infinity fails it


def _no_constant(name: str) -> Any:
    raise AssertionError(f"{name} in JSON output")


def run(cli: Any, args: list[str]) -> None:
    with no_hang():
        r = cli(*args)
    check_outcome(r, args)


@st.composite
def command_line(draw: st.DrawFn) -> list[str]:
    base, options = COMMANDS[draw(st.sampled_from(sorted(COMMANDS)))]
    args = list(base)
    for flag, values in draw(st.lists(st.sampled_from(options), min_size=1, max_size=3)):
        args += [flag, draw(st.sampled_from(values))]
    return args


@pytest.mark.slow
@settings(SETTINGS, max_examples=EXAMPLES or 300)
@given(args=command_line())
def test_cli_options(cli, args: list[str]) -> None:
    run(cli, args)


def leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The paths of every leaf (and every list or mapping) of a parsed file."""
    out = [path] if path else []
    if isinstance(value, dict):
        for k, v in value.items():
            out += leaves(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += leaves(v, (*path, i))
    return out


def replaced(data: Any, path: tuple[Any, ...], value: Any) -> Any:
    copy = json.loads(json.dumps(data))
    node = copy
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return copy


def yaml_text(data: Any) -> str:
    try:
        return yaml.safe_dump(data, sort_keys=False)
    except ValueError:  # an integer too long for yaml's own str(): write the digits ourselves
        return yaml.safe_dump(json.loads(json.dumps(data, default=str)), sort_keys=False)


def mutated(name: str, text: str, parse: Any) -> st.SearchStrategy[tuple[tuple[Any, ...], Any]]:
    data = parse(text)
    return st.tuples(st.sampled_from(leaves(data)), st.sampled_from(HOSTILE_VALUES))


TOPOLOGY = (ROOT / "topologies" / "dgx-h100.yaml").read_text()
RESULTS = (DATA / "validation" / "synthetic_1gpu.json").read_text()
PERF = json.dumps({"wall_time_ms": 0.031, "wall_time_std_ms": 0.001, "min_time_ms": 0.03,
                   "max_time_ms": 0.04})


YAML_FILES = {  # name -> (text, the command that reads the mutated file as {path})
    "topology": (TOPOLOGY, ["analyze", "-t", "grpo", "--topology", "{path}", "--format", "json"]),
    "task": ((ROOT / "tasks" / "83_vocab_parallel_log_prob_topk_chunked.yaml").read_text(),
             ["simulate", "--task", "{path}", "--format", "json"]),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(YAML_FILES))
def test_mutated_yaml_file(cli, tmp_path_factory: pytest.TempPathFactory, name: str) -> None:
    text, command = YAML_FILES[name]

    @settings(SETTINGS, max_examples=EXAMPLES or 150)
    @given(change=mutated(name, text, yaml.safe_load))
    def one(change: tuple[tuple[Any, ...], Any]) -> None:
        path = tmp_path_factory.mktemp(name) / "f.yaml"
        path.write_text(yaml_text(replaced(yaml.safe_load(text), *change)))
        run(cli, [a.format(path=path) for a in command])

    one()


def _json_text(data: Any) -> str:
    try:
        return json.dumps(data)  # NaN and Infinity are written as JSON's non-standard words
    except ValueError:
        return json.dumps(data, default=str)


@pytest.mark.slow
@settings(SETTINGS, max_examples=EXAMPLES or 120)
@given(change=mutated("results", RESULTS, json.loads))
def test_mutated_results(cli, tmp_path_factory: pytest.TempPathFactory,
                         change: tuple[tuple[Any, ...], Any]) -> None:
    folder = tmp_path_factory.mktemp("run")
    (folder / "results.json").write_text(_json_text(replaced(json.loads(RESULTS), *change)))
    run(cli, ["calibrate", str(folder / "results.json"), "--base", "dgx-h200", "--out",
              str(folder / "cal.yaml")])


@pytest.mark.slow
@settings(SETTINGS, max_examples=EXAMPLES or 100)
@given(change=mutated("log", PERF, json.loads), raw=st.sampled_from(
    [None, "{", "NaN", "[" * 5000, "9" * 5000, '{"wall_time_ms": 1e400}', "", "\x00"]))
def test_mutated_pkb_log(cli, tmp_path_factory: pytest.TempPathFactory,
                         change: tuple[tuple[Any, ...], Any], raw: str | None) -> None:
    logs = tmp_path_factory.mktemp("logs")
    folder = logs / "problem_1_allreduce" / "cuda"
    folder.mkdir(parents=True)
    text = raw if raw is not None else _json_text(replaced(json.loads(PERF), *change))
    (folder / "rank_0_perf.json").write_text(text)
    run(cli, ["compare", "--measured", str(logs), "--format", "json"])


@st.composite
def api_call(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    name = draw(st.sampled_from(functions()))
    chosen = draw(st.lists(st.sampled_from(parameters(name)), min_size=1, max_size=3,
                           unique=True))
    values = st.sampled_from([*WRONG, *HOSTILE_VALUES, *NUMBERS, *TEXTS])
    return name, {p: draw(values) for p in chosen}


@pytest.mark.slow
@settings(SETTINGS, max_examples=EXAMPLES or 300)
@given(drawn=api_call())
def test_api_arguments(no_trace_runs: None, drawn: tuple[str, dict[str, Any]]) -> None:
    name, replaced = drawn
    with no_hang():
        try:
            call(name, replaced)
        except PkbsimError as exc:
            assert "\n" not in exc.one_line(), (name, replaced)
