"""``pkbsim run`` on CPU: a tiny problem in PKB's layout (tests/data/pkb_tiny: an all-reduce of a
4 x 8 tensor, then out * 0.5 + 1) run through the real torchrun path with gloo at world size 2,
with a correct, a wrong, a crashing and a hanging candidate; the lookup, the status rules and
validate/pkb_run.py's timing and comparison helpers on their own. Skipped where torch is
absent."""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from paths import ROOT

from pkbsim import processes
from pkbsim.cli import run as run_cmd
from pkbsim.errors import UsageError
from pkbsim.pkb import runner as pkb_runner
from pkbsim.pkb.run_profile import load_run_profiles
from pkbsim.pkb.runner import (
    PkbError,
    RankTime,
    RunOptions,
    RunResult,
    VariantResult,
    candidate_backend,
    check_options,
    child_command,
    classify,
    find_problem,
    read_perf,
    run_variant,
)

torch = pytest.importorskip("torch")

TINY = ROOT / "tests" / "data" / "pkb_tiny"
SOLUTIONS = TINY / "solutions"
SCRIPT = ROOT / "validate" / "pkb_run.py"
STEM = "1_tiny_allreduce"
# PKB's rank_<r>_perf.json: keys in order, with their types
PERF_KEYS = {"wall_time_ms": float, "wall_time_total_ms": float, "wall_time_std_ms": float,
             "min_time_ms": float, "max_time_ms": float, "iterations": int,
             "warmup_iterations": int, "num_input_groups": float, "l2_cache_size_bytes": float,
             "timed_tensor_bytes": float}
QUICK = RunOptions(device="cpu", world_size=2, warmup_iters=3, iters=5, timeout_s=120.0)


@pytest.fixture(scope="module")
def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pkb_run_under_test", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def gone(pid: int, within_s: float = 5.0) -> bool:
    """Not running (a zombie counts as gone) within ``within_s``."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


def statuses(out: Path, backend: str) -> dict[int, dict[str, Any]]:
    return pkb_runner.read_statuses(out / "runs" / f"problem_{STEM}" / backend)


def tiny_inputs(rank: int, trial: int) -> torch.Tensor:
    spec = importlib.util.spec_from_file_location("tiny_inputs",
                                                  TINY / "utils" / "input_output_tensors.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    (tensor,) = module.create_input_tensor(rank, 2, 1, (1024, 1024), torch.bfloat16,
                                           trial=trial, device=torch.device("cpu"))
    return tensor


# --- through torchrun --------------------------------------------------------------------------

@pytest.mark.slow
def test_run_command_times_both_in_pkbs_format(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    stale = out / "logs" / f"problem_{STEM}" / "ok" / "rank_5_perf.json"
    stale.parent.mkdir(parents=True)
    stale.write_text("{}")  # an earlier run at a larger world size
    stale_profile = stale.with_name("rank_5_profile.json")
    stale_profile.write_text("{}")
    stale_trace = stale.with_name("rank_5_trace.json.gz")
    stale_trace.write_bytes(b"")
    run_cmd.run_command(TINY, "1", SOLUTIONS / f"{STEM}_ok.py", None, out, 120.0, "cpu")
    text = capsys.readouterr()
    assert "pkbsim run: reference" in text.err and "pkbsim run: ok" in text.err
    assert f"Problem {STEM}" in text.out and "2 ranks, device cpu" in text.out
    assert "Speedup (reference / candidate, slowest ranks)" in text.out
    assert not stale.exists() and not stale_profile.exists() and not stale_trace.exists()
    for backend in ("reference", "ok"):
        folder = out / "logs" / f"problem_{STEM}" / backend
        assert sorted(p.name for p in folder.iterdir()) == [
            "rank_0.pt", "rank_0_perf.json", "rank_0_profile.json", "rank_0_trace.json.gz",
            "rank_1.pt", "rank_1_perf.json", "rank_1_profile.json", "rank_1_trace.json.gz"]
        # 10 calls profiled (the default) on gloo: no GPU events; the host's collective op
        profiles = load_run_profiles(folder)
        assert [(p.rank, p.world_size, p.backend, p.problem) for p in profiles] == [
            (0, 2, backend, STEM), (1, 2, backend, STEM)]
        collective = "c10d::allreduce_" if backend == "reference" else "c10d::allgather_"
        for p in profiles:
            assert (p.device, p.iterations, p.error, p.nccl_version) == ("cpu", 10, None, None)
            assert p.variant == ("reference" if backend == "reference" else "candidate")
            assert (p.kernels, p.nccl_kernels, p.memcpy, p.memset, p.runtime) == ((),) * 5
            assert p.collectives_per_call(collective) == 1.0
        for rank in (0, 1):
            perf = json.loads((folder / f"rank_{rank}_perf.json").read_text())
            assert list(perf) == list(PERF_KEYS)
            assert {k: type(v) for k, v in perf.items()} == PERF_KEYS
            # PKB's defaults; a 4 x 8 bfloat16 tensor (64 B) takes the most groups in 3 x 50 MiB
            assert (perf["iterations"], perf["warmup_iterations"]) == (100, 500)
            assert perf["timed_tensor_bytes"] == 64.0
            assert perf["l2_cache_size_bytes"] == 50 * 1024**2
            assert perf["num_input_groups"] == 128.0
            assert perf["wall_time_ms"] == pytest.approx(perf["wall_time_total_ms"] / 100)
            assert 0 < perf["min_time_ms"] <= perf["wall_time_ms"] <= perf["max_time_ms"]
            # the saved output is trial 0's: the sum over ranks, * 0.5 + 1
            expected = ((tiny_inputs(0, 0) + tiny_inputs(1, 0)) * 0.5 + 1.0).float()
            saved = torch.load(folder / f"rank_{rank}.pt", weights_only=True)
            assert torch.allclose(saved.float(), expected, atol=1e-2, rtol=1e-2)
        assert {s["status"] for s in statuses(out, backend).values()} == {"ok"}


@pytest.mark.slow
def test_wrong_candidate_stops_before_timing(tmp_path: Path) -> None:
    problem = find_problem(TINY, STEM)
    result = run_variant(problem, SOLUTIONS / f"{STEM}_wrong.py", "wrong", tmp_path, QUICK,
                         SCRIPT)
    assert result.status == "wrong", result.error
    assert result.error is not None
    assert result.error.startswith("trial 1/5, rank 1: output: not allclose (atol=0.01, ")
    assert result.ranks == () and result.world_size == 2
    assert not list(result.logs_dir.glob("rank_*_perf.json"))


@pytest.mark.slow
def test_crash_names_the_rank_that_failed_first(tmp_path: Path) -> None:
    problem = find_problem(TINY, STEM)
    result = run_variant(problem, SOLUTIONS / f"{STEM}_crash.py", "crash", tmp_path, QUICK,
                         SCRIPT)
    assert result.status == "crash"
    assert result.error == ("rank 1 in check trial 1/5: candidate: RuntimeError: tiny kernel: "
                            "illegal memory access")
    assert result.ranks == ()


@pytest.mark.slow
def test_hang_is_killed_with_its_whole_tree(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(processes, "KILL_GRACE_S", 1.0)  # the grace of run_in_group
    problem = find_problem(TINY, STEM)
    options = RunOptions(device="cpu", world_size=2, timeout_s=12.0)
    start = time.monotonic()
    result = run_variant(problem, SOLUTIONS / f"{STEM}_hang.py", "hang", tmp_path, options,
                         SCRIPT)
    assert time.monotonic() - start < 12.0 + 10.0
    assert result.status == "hang"
    assert result.error == ("no result after 12 s; process tree killed; every rank in "
                            "'check trial 1/5: candidate'")
    pids = [s["pid"] for s in statuses(tmp_path, "hang").values()]
    assert len(pids) == 2  # rank 1 ignores SIGTERM: only the SIGKILL ends it
    assert all(gone(pid) for pid in pids)


def test_run_command_fails_with_the_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    def variant(backend: str, status: str, error: str | None, *times_us: float
                ) -> VariantResult:
        ranks = tuple(RankTime(r, t, 0.0, t, t) for r, t in enumerate(times_us))
        return VariantResult(backend, status, error, 2, ranks, 1.0, tmp_path / backend,
                             tmp_path / "console.log", ())

    result = RunResult(find_problem(TINY, "1"), variant("reference", "ok", None, 12.5, 250.0),
                       variant("cuda", "wrong", "trial 2/5, rank 1: output: not allclose"))
    seen: list[RunOptions] = []

    def fake_run(*args: Any, **kwargs: Any) -> RunResult:
        seen.append(args[4])
        return result

    monkeypatch.setattr(pkb_runner, "run_problem", fake_run)
    with pytest.raises(SystemExit) as info:
        run_cmd.run_command(TINY, "1", SOLUTIONS / f"{STEM}_ok.py", 4, tmp_path, 30.0, "cuda")
    assert info.value.code == 1
    with pytest.raises(SystemExit):
        run_cmd.run_command(TINY, "1", SOLUTIONS / f"{STEM}_ok.py", None, tmp_path, 30.0, "cpu",
                            profile_iters=0)
    assert seen == [RunOptions(world_size=4, device="cuda", timeout_s=30.0),
                    RunOptions(device="cpu", timeout_s=30.0, profile_iters=0)]
    assert RunOptions().profile_iters == 10
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()
            if line.startswith(("reference ", "candidate "))}
    cells = [cell.strip() for cell in rows["reference"].split("│")]
    assert cells[2:5] == ["ok", "12.50 250", "250 (rank 1)"]
    assert "wrong" in rows["candidate"] and "trial 2/5, rank 1" in rows["candidate"]
    assert result.speedup is None
    assert RunResult(result.problem, result.reference, result.reference).speedup == 1.0


# --- lookup and options ------------------------------------------------------------------------

def test_find_problem_by_number_or_stem() -> None:
    for name in ("1", " 1 ", STEM, f"{STEM}.py"):
        problem = find_problem(TINY, name)
        assert (problem.stem, problem.problem_id) == (STEM, 1)
        assert problem.reference == TINY / "reference" / f"{STEM}.py"


def layout(root: Path, *references: str, inputs: bool = True) -> Path:
    (root / "reference").mkdir(parents=True)
    for name in references:
        (root / "reference" / name).write_text("")
    if inputs:
        (root / "utils").mkdir()
        (root / "utils" / "input_output_tensors.py").write_text("")
    return root


def test_find_problem_errors(tmp_path: Path) -> None:
    pkb = layout(tmp_path / "pkb", "3_a.py", "3_b.py", "12_allgather.py", "notes.py")
    cases = {
        (tmp_path / "none", "1"): "no such folder",
        (tmp_path, "1"): "not a PKB checkout: no reference/ folder",
        (layout(tmp_path / "bare", "1_x.py", inputs=False), "1"):
            "not a PKB checkout: no utils/input_output_tensors.py",
        (pkb, "7"): "no problem 7: no reference/7_*.py (problems 3-12)",
        (pkb, "3"): "problem 3 is ambiguous: 3_a, 3_b; give the stem",
        (pkb, "12_allgathr"): "no problem '12_allgathr': no reference/12_allgathr.py; did you "
                              "mean 12_allgather?",
        (pkb, "notes"): "reference/notes.py: the name has no leading problem number",
    }
    for (root, name), message in cases.items():
        with pytest.raises(PkbError) as info:
            find_problem(root, name)
        assert info.value.message == message
        assert info.value.file is not None
    assert find_problem(pkb, "012").stem == "12_allgather"  # by number, as an integer


def test_candidate_backend() -> None:
    assert candidate_backend("1_allreduce", Path("x/1_allreduce_cuda.py")) == "cuda"
    assert candidate_backend("1_allreduce", Path("1_allreduce_triton_v2.py")) == "triton_v2"
    assert candidate_backend("1_allreduce", Path("1_allreduce_reference.py")) == "candidate"
    assert candidate_backend("1_allreduce", Path("1_allreduce.py")) == "candidate"
    assert candidate_backend("1_allreduce", Path("1_allreduce_.py")) == "candidate"
    assert candidate_backend("1_allreduce", Path("solution.py")) == "candidate"


def test_bad_options_and_files(tmp_path: Path) -> None:
    for options, text in ((RunOptions(world_size=0), "--world-size 0"),
                          (RunOptions(device="tpu"), "--device 'tpu'"),
                          (RunOptions(timeout_s=0.0), "--timeout 0.0"),
                          (RunOptions(timeout_s=float("inf")), "--timeout inf"),
                          (RunOptions(iters=0), "iters 0"),
                          (RunOptions(warmup_iters=-1), "warmup_iters -1"),
                          (RunOptions(dtype="int8"), "dtype 'int8'"),
                          (RunOptions(profile_iters=-1), "profile_iters -1")):
        with pytest.raises(UsageError, match=text.replace("(", r"\(")):
            check_options(options)
    check_options(RunOptions(warmup_iters=0, profile_iters=0))
    problem = find_problem(TINY, "1")
    for iters in (0, 7):
        cmd = child_command(problem, None, tmp_path, tmp_path, RunOptions(profile_iters=iters),
                            SCRIPT)
        assert cmd[cmd.index("--profile-iters") + 1] == str(iters)
    with pytest.raises(PkbError, match="no such file"):
        pkb_runner.run_problem(TINY, "1", tmp_path / "missing.py", tmp_path)
    with pytest.raises(PkbError, match="no such script"):
        pkb_runner.run_problem(TINY, "1", SOLUTIONS / f"{STEM}_ok.py", tmp_path,
                               scripts=tmp_path)


# --- status rules ------------------------------------------------------------------------------

def test_classify() -> None:
    running = {0: {"phase": "timing", "status": "running"},
               1: {"phase": "check trial 2/5: candidate", "status": "running"}}
    assert classify(None, 30.0, running, 3, [], "") == (
        "hang", "no result after 30 s; process tree killed; rank 0 in 'timing'; rank 1 in "
                "'check trial 2/5: candidate'; rank 2 not started")
    assert classify(None, 5.0, {}, 2, [], "")[1] == (
        "no result after 5 s; process tree killed; every rank not started")
    crash = {0: {"status": "crash", "error": "rank 0: lost its peer", "time_s": 20.0},
             1: {"status": "crash", "error": "rank 1: the cause", "time_s": 10.0}}
    assert classify(1, 30.0, crash, 2, [], "") == ("crash", "rank 1: the cause")
    wrong = {0: {"status": "wrong", "error": "trial 2/5, rank 1: x"}, 1: crash[1]}
    assert classify(1, 30.0, wrong, 2, [], "") == ("wrong", "trial 2/5, rank 1: x")
    assert classify(1, 30.0, {}, 2, [], "$ torchrun\nImportError: no torch\n") == (
        "crash", "exit 1: ImportError: no torch")
    assert classify(-9, 30.0, {}, 2, [], "") == ("crash", "killed by SIGKILL")
    assert classify(0, 30.0, {}, 2, ["rank 1 wrote no rank_1_perf.json"], "") == (
        "crash", "rank 1 wrote no rank_1_perf.json")
    assert classify(0, 30.0, {}, 2, [], "") == ("ok", None)


def test_read_perf(tmp_path: Path) -> None:
    record = {"wall_time_ms": 0.5, "wall_time_std_ms": 0.1, "min_time_ms": 0.25,
              "max_time_ms": 2.0}
    (tmp_path / "rank_0_perf.json").write_text(json.dumps(record))
    (tmp_path / "rank_1_perf.json").write_text(json.dumps({**record, "wall_time_ms": 0.0}))
    (tmp_path / "rank_2_perf.json").write_text("{")
    ranks, missing = read_perf(tmp_path, 4)
    assert [(r.rank, r.time_us, r.std_us, r.min_us, r.max_us) for r in ranks] == [
        (0, 500.0, 100.0, 250.0, 2000.0)]
    assert missing[0] == "rank_1_perf.json: wall_time_ms 0.0 is not a positive time"
    assert missing[1].startswith("rank_2_perf.json: unreadable (not JSON")
    assert missing[2] == "rank 3 wrote no rank_3_perf.json"


# --- validate/pkb_run.py's helpers -------------------------------------------------------------

def test_input_groups_fill_three_l2(script: ModuleType) -> None:
    l2 = 50 * 1024**2
    groups = script.num_input_groups
    assert groups(3 * l2, l2) == 1 and groups(4 * l2, l2) == 1
    assert groups(l2, l2) == 4  # floor(3 L2 / L2) + 1
    assert groups(2 * l2, l2) == 2  # floor(1.5) + 1
    assert groups(3 * l2 - 1, l2) == 2  # floor(1.000...) + 1
    assert groups(2 * 1024**2, l2) == 76  # floor(75) + 1
    assert groups(1024**2, l2) == 128  # 151, capped
    assert groups(0, l2) == 1


def test_perf_record_statistics(script: ModuleType) -> None:
    record = script.perf_record([1.0, 2.0, 3.0, 6.0], 12.0, 7, 3, 100, 40)
    assert record == {"wall_time_ms": 3.0, "wall_time_total_ms": 12.0,
                      "wall_time_std_ms": (14 / 3) ** 0.5, "min_time_ms": 1.0,
                      "max_time_ms": 6.0, "iterations": 4, "warmup_iterations": 7,
                      "num_input_groups": 3.0, "l2_cache_size_bytes": 100.0,
                      "timed_tensor_bytes": 40.0}
    assert script.perf_record([2.0], 2.0, 0, 1, 1, 1)["wall_time_std_ms"] == 0.0


def test_timed_argument(script: ModuleType) -> None:
    a, b, c = torch.ones(2), torch.zeros(3), torch.full((4,), 2.0)
    tensor, swap = script.timed_argument((5, a, b))
    assert tensor is a
    new = torch.empty(2)
    assert swap(new)[0] == 5 and swap(new)[1] is new and swap(new)[2] is b
    tensor, swap = script.timed_argument((1, [b, c], (a,)))
    assert tensor is b
    args = swap(new)
    assert isinstance(args[1], list) and args[1][0] is new and args[1][1] is c
    with pytest.raises(TypeError, match="no tensor"):
        script.timed_argument((1, "x", [2]))


def test_mismatch_follows_pkbs_comparison(script: ModuleType) -> None:
    def check(expected: Any, got: Any) -> str | None:
        return script.mismatch(script.saved_form(expected), script.saved_form(got), 1e-2, 1e-2)

    x = torch.tensor([1.0, 100.0])
    assert check(x, x + torch.tensor([0.0199, 1.0099])) is None  # |d| <= atol + rtol |ref|
    found = check(x, x + torch.tensor([0.0, 1.05]))
    assert found is not None and found.startswith("output: not allclose (atol=0.01, rtol=0.01)")
    assert "at flat index 1 (reference 100, candidate 101.05)" in found
    assert check(x.to(torch.bfloat16), x) is None  # compared as float32
    assert check(x, x.reshape(2, 1)) == "output: shape (2, 1), reference (2,)"
    assert check((x, 3), [x, 3]) is None  # a tuple and a list are saved alike
    assert check((x, 3), (x, 4)) == "output.output_1: 4, reference 3"
    assert check((x,), (x, x)) == ("output: keys differ (only in reference [], only in "
                                   "candidate ['output_1'])")
    assert check(x, None) == "output: NoneType, reference Tensor"
    nan = check(x, torch.tensor([float("nan"), 100.0]))
    assert nan is not None and "flat index 0" in nan
