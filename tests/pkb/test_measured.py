"""Measured inputs: PKB's logs (fixtures in PKB's layout), a CSV, one value; every bad input is
one error naming the file and field."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from paths import DATA

from pkbsim.pkb.logs import (
    MeasurementError,
    from_value,
    load_measured,
    read_measured_csv,
    read_pkb_logs,
)

DATA = DATA / "pkb_logs"
LOGS = DATA / "logs"
P1 = "1_allreduce"
P83 = "83_vocab_parallel_log_prob_topk_chunked"


def test_logs_slowest_rank_per_trial_median_over_trials() -> None:
    got = read_pkb_logs(LOGS)
    assert got.problems() == [P1, P83]  # pkb_worker/ staging is no problem
    ref1 = got.reference(P1)
    assert ref1 is not None and ref1.world_size == 4 and len(ref1.trials) == 1
    assert ref1.trials[0].per_rank_us == pytest.approx((45.1, 46.2, 45.8, 44.9))
    assert ref1.time_us == pytest.approx(46.2)  # the slowest rank, not the mean
    cuda = got.get("allreduce", "cuda")  # any task name resolves
    assert cuda is not None and not cuda.is_reference and cuda.time_us == pytest.approx(31.2)
    ref83 = got.reference("grpo")
    assert ref83 is not None and ref83.world_size == 2
    assert [t.time_us for t in ref83.trials] == pytest.approx([230.5, 229.0, 240.2])
    assert ref83.time_us == pytest.approx(230.5)  # median of the trials' slowest ranks
    assert [m.variant for m in got.candidates(P83)] == ["parallelkittens"]  # triton: no perf
    pk = got.get(P83, "parallelkittens")
    assert pk is not None and pk.time_us == pytest.approx(12.1)
    assert pk.time_s == pytest.approx(12.1e-6)


def test_one_problem_folder_and_load_measured_dispatch() -> None:
    one = read_pkb_logs(LOGS / f"problem_{P1}")
    assert one.problems() == [P1] and len(one.items) == 2
    assert load_measured(LOGS).problems() == [P1, P83]
    assert load_measured(DATA / "times.csv").problems() == [P1, P83]


def test_csv_names_ids_and_aliases_resolve() -> None:
    got = read_measured_csv(DATA / "times.csv")
    rows = [(m.problem, m.variant, m.time_us) for m in got.items]
    assert rows == [(P1, "reference", 46.2), (P1, "cuda", 31.2), (P83, "reference", 230.5),
                    (P83, "parallelkittens", 12.1)]
    assert all(m.world_size is None for m in got.items)  # no ranks given


def test_csv_with_ranks_takes_the_slowest() -> None:
    got = read_measured_csv(DATA / "ranks.csv")
    cuda, ref = got.get("1", "cuda"), got.get("1", "reference")
    assert cuda is not None and cuda.time_us == 31.2 and cuda.world_size == 4
    assert ref is not None and ref.trials[0].per_rank_us == (45.1, 46.2)


def test_single_value() -> None:
    m = from_value(30.0, "grpo")
    assert (m.problem, m.variant, m.time_us, m.world_size) == (P83, "candidate", 30.0, None)


# ---------------------------------------------------------------- errors, one line each

def _copy(tmp_path: Path) -> Path:
    return Path(shutil.copytree(LOGS, tmp_path / "logs"))


def _perf(root: Path) -> Path:
    return root / f"problem_{P1}" / "cuda" / "rank_2_perf.json"


def _error(fn, *args) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(MeasurementError) as info:
        fn(*args)
    line = info.value.one_line()
    assert "\n" not in line
    return line


def test_bad_json(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    _perf(root).write_text("{not json")
    assert "rank_2_perf.json: not JSON" in _error(read_pkb_logs, root)


@pytest.mark.parametrize(("content", "expected"), [
    ({"iterations": 100}, "wall_time_ms: missing"),
    ({"wall_time_ms": 0}, "wall_time_ms: must be a positive time"),
    ({"wall_time_ms": -0.5}, "wall_time_ms: must be a positive time"),
    ({"wall_time_ms": "0.03"}, "wall_time_ms: expected a number"),
    ({"wall_time_ms": True}, "wall_time_ms: expected a number"),
    ([0.03], "expected a JSON object"),
])
def test_bad_perf_fields(tmp_path: Path, content: object, expected: str) -> None:
    root = _copy(tmp_path)
    _perf(root).write_text(json.dumps(content))
    line = _error(read_pkb_logs, root)
    assert "rank_2_perf.json" in line and expected in line


def test_missing_rank_is_an_error(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    _perf(root).unlink()
    assert "ranks 0..3 expected, missing 2" in _error(read_pkb_logs, root)


def test_bad_rank_file_name(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    _perf(root).rename(_perf(root).with_name("rank_two_perf.json"))
    assert "rank_two_perf.json: expected a file name rank_<integer>_perf.json" in _error(
        read_pkb_logs, root)


def test_unknown_problem_folder(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    (root / f"problem_{P1}").rename(root / "problem_999_nosuch")
    line = _error(read_pkb_logs, root)
    assert "problem_999_nosuch: problem directory: '999_nosuch': unknown task" in line


def test_no_perf_files_and_no_folder(tmp_path: Path) -> None:
    assert "no rank_<r>_perf.json found" in _error(read_pkb_logs, tmp_path)
    assert "no such file or directory" in _error(load_measured, tmp_path / "nope")


@pytest.mark.parametrize(("text", "expected"), [
    ("", "line 1: header must name problem, variant, time_us"),
    ("problem,time_us\n1,3\n", "line 1: header must name problem, variant, time_us (optional: "
     "rank); missing variant"),
    ("problem,variant,time_us,gpu\n1,a,3,h100\n", "line 1: unknown column 'gpu'"),
    ("problem,variant,time_us\n", "no data rows after the header"),
    ("problem,variant,time_us\n1,a,3\n1,a\n", "line 3: expected 3 columns"),
    ("problem,variant,time_us\nnosuch,a,3\n", "line 2: problem: 'nosuch': unknown task"),
    ("problem,variant,time_us\n1,,3\n", "line 2: variant: empty variant"),
    ("problem,variant,time_us\n1,a,fast\n", "line 2: time_us: expected a number, got 'fast'"),
    ("problem,variant,time_us\n1,a,0\n", "line 2: time_us: must be a positive time, got 0"),
    ("problem,variant,time_us\n1,a,nan\n", "line 2: time_us: must be a positive time"),
    ("problem,variant,time_us\n1,a,3\nallreduce,a,4\n", "line 3: duplicate row for "
     "(1_allreduce, a); first on line 2"),
    ("problem,variant,rank,time_us\n1,a,x,3\n", "line 2: rank: expected a rank"),
    ("problem,variant,rank,time_us\n1,a,1,3\n", "1_allreduce, a: rank: ranks 0..1 expected, "
     "missing 0"),
])
def test_bad_csv(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "m.csv"
    path.write_text(text)
    line = _error(read_measured_csv, path)
    assert line.startswith(str(path)) and expected in line


@pytest.mark.parametrize("value", [0.0, -1.0, float("inf"), float("nan")])
def test_bad_single_value(value: float) -> None:
    assert "--measured-us: must be a positive time" in _error(from_value, value, "1")


def test_single_value_unknown_problem() -> None:
    assert "unknown task" in _error(from_value, 3.0, "nosuch")
