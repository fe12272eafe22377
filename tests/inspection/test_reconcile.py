"""Static call sites reconciled with what a run's profiler saw (recorded profiles, no GPU)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from pkbsim.inspection import inspect_source
from pkbsim.inspection.profile import Profile
from pkbsim.inspection.reconcile import profiles_for, reconcile
from pkbsim.pkb.run_profile import ProfiledOp, RunProfile

HEAD = "import torch\nimport torch.distributed as dist\n"


def profile(nccl: float = 0.0, memcpy: dict[str, float] | None = None,
            runtime: dict[str, float] | None = None, error: str | None = None,
            collectives: dict[str, float] | None = None,
            problem: str | None = "1_allreduce", backend: str | None = "cuda",
            solution: str | None = None, iterations: int = 10) -> RunProfile:
    return RunProfile(
        file="logs/problem_1_allreduce/cuda/rank_0_profile.json", problem=problem,
        backend=backend, rank=0, world_size=1, variant="candidate", solution=solution,
        iterations=iterations, kernels=(ProfiledOp("copy_kernel", 1.0, 2.0),),
        nccl_kernels=(ProfiledOp("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", nccl, 5.0),)
        if nccl else (),
        memcpy=tuple(ProfiledOp(k, v, 1.0) for k, v in (memcpy or {}).items()), memset=(),
        runtime=tuple(ProfiledOp(k, v) for k, v in (runtime or {}).items()), error=error,
        collectives=tuple(ProfiledOp(k, v) for k, v in (collectives or {}).items()))


UNKNOWN_NCCL = HEAD + textwrap.dedent("""\
    def solution(x):
        if x.abs().max() > 1e4:
            dist.all_reduce(x)
        return x
""")
HOT_NCCL = HEAD + "def solution(x):\n    dist.all_reduce(x)\n    return x\n"


def test_hot_nccl_that_launched_nothing_is_a_fallback() -> None:
    row = inspect_source(HOT_NCCL, "1_allreduce_cuda.py", Profile(world_size=1))
    assert "nccl_payload" in row.mechanisms and row.nccl_on_hot_path == ("all_reduce",)
    done = reconcile(row, [profile(nccl=0.0)])
    [site] = done.call_sites
    assert (site.path, site.source) == ("fallback", "profiler")
    assert site.condition.startswith("no NCCL kernel and no collective op ran (profiler, 10 ")
    assert "nccl_payload" not in done.mechanisms and done.nccl_on_hot_path == ()
    assert any("did not run" in n for n in done.notes)
    # the host's collective op says NCCL ran (at W = 1 it launches no kernel)
    kept = reconcile(row, [profile(collectives={"c10d::allreduce_": 1.0})])
    assert kept.call_sites[0].path == "hot" and "nccl_payload" in kept.mechanisms
    # another collective ran, not this one
    other = reconcile(row, [profile(collectives={"c10d::_allgather_base_": 1.0})])
    added, mine = other.call_sites  # the all-gather no call site accounts for, first (line 0)
    assert (added.line, added.path, mine.path) == (0, "hot", "fallback")
    assert mine.condition.startswith("only c10d::_allgather_base_ 1 per call ran")


def test_an_except_fallback_that_ran_every_call_is_hot() -> None:
    code = HEAD + textwrap.dedent("""\
        def solution(x):
            try:
                return torch.ops.mine.all_reduce(x)
            except RuntimeError:
                dist.all_reduce(x)
                return x
    """)
    row = inspect_source(code, "s.py", Profile(world_size=1))
    assert row.call_sites[0].path == "fallback" and "nccl_payload" not in row.mechanisms
    done = reconcile(row, [profile(collectives={"c10d::allreduce_": 1.0})])
    site = done.call_sites[0]
    assert (site.path, site.source) == ("hot", "profiler")
    assert site.condition.startswith("ran on every call: c10d::allreduce_ 1 per call")
    assert "the inspection said fallback: `except RuntimeError`" in site.condition
    assert done.mechanisms == ("nccl_payload",) and done.nccl_on_hot_path == ("all_reduce",)


def test_nccl_kernels_confirm_an_undecided_site() -> None:
    row = inspect_source(UNKNOWN_NCCL, "s.py")
    assert row.call_sites[0].path == "unknown" and "nccl_payload" not in row.mechanisms
    done = reconcile(row, [profile(nccl=1.0)])
    assert done.call_sites[0].path == "hot" and done.call_sites[0].source == "profiler"
    assert "nccl_payload" in done.mechanisms
    # NCCL that no call site accounts for is added from the profiler
    bare = inspect_source(HEAD + "def solution(x):\n    return x\n", "s.py")
    [added] = reconcile(bare, [profile(collectives={"c10d::allreduce_": 1.0})]).call_sites
    assert (added.line, added.kind, added.path) == (0, "nccl_payload", "hot")
    assert done.evidence["nccl_payload"][0][0] == row.call_sites[0].line


def test_a_peer_memcpy_inspection_missed_is_added() -> None:
    row = inspect_source(HEAD + "def solution(x):\n    return x.clone()\n", "s.py")
    assert row.call_sites == ()
    done = reconcile(row, [profile(memcpy={"PtoP": 2.0})])
    [site] = done.call_sites
    assert (site.line, site.kind, site.path, site.source) == (0, "copy_engine", "hot",
                                                             "profiler")
    assert "2 peer memcpy(s)" in site.condition and "copy_engine" in done.mechanisms
    # at W = 1 a peer copy to the same GPU shows as DtoD; the API call names it
    done = reconcile(row, [profile(memcpy={"DtoD": 1.0},
                                   runtime={"cudaMemcpyPeerAsync": 1.0})])
    assert "copy_engine" in done.mechanisms
    # a plain device-to-device copy is not a peer copy
    assert "copy_engine" not in reconcile(row, [profile(memcpy={"DtoD": 1.0})]).mechanisms


def test_the_most_any_rank_ran_counts() -> None:
    row = inspect_source(HOT_NCCL, "s.py")
    ranks = [profile(nccl=0.0), profile(nccl=1.0)]
    assert "nccl_payload" in reconcile(row, ranks).mechanisms


def test_unusable_profiles_change_nothing() -> None:
    row = inspect_source(HOT_NCCL, "s.py")
    for bad in ([profile(error="RuntimeError: CUPTI")], [profile(iterations=0)]):
        done = reconcile(row, bad)
        assert done.call_sites == row.call_sites and done.mechanisms == row.mechanisms
        assert "no usable profile" in done.notes[-1]
    assert reconcile(row, []).notes[-1] == "run log: no profile of this file"


def test_profiles_are_matched_to_their_file() -> None:
    a = profile(problem="1_allreduce", backend="cuda")
    b = profile(problem="13_gemm_allreduce", backend="triton")
    assert profiles_for("x/1_allreduce_cuda.py", [a, b]) == [a]
    assert profiles_for("x/13_gemm_allreduce_triton.py", [a, b]) == [b]
    assert profiles_for("x/other.py", [a, b]) == []
    assert profiles_for("x/other.py", [a]) == [a]  # one candidate in the log: that one
    named = profile(solution="/runs/cand_x.py")
    assert profiles_for("elsewhere/cand_x.py", [a, named]) == [named]


def _write_profile(folder: Path, nccl: float) -> Path:
    path = folder / "logs" / "problem_1_allreduce" / "cuda" / "rank_0_profile.json"
    path.parent.mkdir(parents=True)
    data = {"schema": "pkbsim.runprofile/1", "rank": 0, "world_size": 1,
            "variant": "candidate", "solution": None, "device": "cuda", "iterations": 10,
            "torch_version": "2.11.0", "nccl_version": "2.28.9",
            "kernels": [{"name": "k", "per_call": 1.0, "gpu_us_per_call": 1.0}],
            "nccl_kernels": ([{"name": "ncclDevKernel_AllReduce", "per_call": nccl,
                               "gpu_us_per_call": 3.0}] if nccl else []),
            "memcpy": [], "memset": [], "runtime": []}
    path.write_text(json.dumps(data))
    return path


def test_cli_run_log(cli, tmp_path: Path) -> None:
    solution = tmp_path / "1_allreduce_cuda.py"
    solution.write_text(HOT_NCCL)
    _write_profile(tmp_path / "run", nccl=0.0)
    result = cli("inspect", str(solution), "--format", "json", "--run-log",
                 str(tmp_path / "run"))
    assert result.code == 0, result.err
    data = json.loads(result.out)["files"][0]
    assert data["mechanisms"] == [] and data["call_sites"][0]["path"] == "fallback"
    assert data["call_sites"][0]["source"] == "profiler"
    table = cli("inspect", str(solution), "--run-log", str(tmp_path / "run"))
    assert "no NCCL kernel and no collective op ran" in table.out


def test_cli_run_log_errors(cli, tmp_path: Path) -> None:
    solution = tmp_path / "s.py"
    solution.write_text(HOT_NCCL)
    bad = _write_profile(tmp_path / "run", nccl=1.0)
    bad.write_text("{not json")
    result = cli("inspect", str(solution), "--run-log", str(tmp_path / "run"))
    assert result.code == 2 and "Traceback" not in result.err
    assert str(bad) in result.err and len(result.err.strip().splitlines()) == 1
    missing = cli("inspect", str(solution), "--run-log", str(tmp_path / "nothing"))
    assert missing.code == 2 and "nothing" in missing.err


# --- profiles recorded on an H200 (docs/measurements/pkb_run_profile_h200_w1/) ---------------

RECORDED = Path(__file__).resolve().parents[1] / "data" / "run_profiles"
CANDIDATES = Path(__file__).resolve().parents[2] / "docs" / "measurements" / \
    "pkb_run_profile_h200_w1"


def test_recorded_h200_profiles_reconcile_the_four_candidates(cli, tmp_path: Path) -> None:
    """At W = 1 NCCL launches no kernel: its host op says it ran. The except-fallback
    candidate took its fallback on every call; the dtype fallback never ran; the peer copy
    within one GPU is named by its API call."""
    for backend in ("nccl", "dtype_fallback", "memcpy_peer", "except_fallback"):
        (tmp_path / f"1_allreduce_{backend}.py").write_text(
            (CANDIDATES / f"cand_{backend}.py").read_text())
    static = json.loads(cli("inspect", str(tmp_path), "-w", "1", "--format", "json").out)
    result = cli("inspect", str(tmp_path), "-w", "1", "--format", "json", "--run-log",
                 str(RECORDED))
    assert result.code == 0, result.err
    before = {Path(f["file"]).stem: f for f in static["files"]}
    after = {Path(f["file"]).stem: f for f in json.loads(result.out)["files"]}

    def paths(files: dict, stem: str) -> list[tuple[str, str, str]]:
        return [(s["kind"], s["path"], s["source"]) for s in files[f"1_allreduce_{stem}"][
            "call_sites"]]

    assert paths(before, "except_fallback") == [("nccl_payload", "fallback", "static")]
    assert paths(after, "except_fallback") == [("nccl_payload", "hot", "profiler")]
    assert after["1_allreduce_except_fallback"]["mechanisms"] == ["nccl_payload"]
    for stem, expected in (("nccl", [("nccl_payload", "hot", "static")]),
                           ("dtype_fallback", [("nccl_payload", "fallback", "static")]),
                           ("memcpy_peer", [("copy_engine", "hot", "static")])):
        assert paths(before, stem) == paths(after, stem) == expected, stem
    assert after["1_allreduce_dtype_fallback"]["mechanisms"] == []
    assert after["1_allreduce_memcpy_peer"]["mechanisms"] == ["copy_engine"]


def test_a_metadata_collective_accounts_for_the_op_it_ran() -> None:
    """A scalar all-reduce (the size rule's metadata) explains the c10d::allreduce_ that ran:
    no payload site is added from the profiler, so NCCL does not become the payload's carrier."""
    code = HEAD + textwrap.dedent("""\
        def solution(x):
            peak = x.abs().max()
            dist.all_reduce(peak, op=dist.ReduceOp.MAX)
            return x / peak
    """)
    row = inspect_source(code, "1_allreduce_cuda.py", Profile(world_size=1))
    [site] = row.call_sites
    assert (site.kind, site.path, site.elements) == ("nccl_metadata", "hot", 1)
    done = reconcile(row, [profile(collectives={"c10d::allreduce_": 1.0})])
    assert done.call_sites == row.call_sites and "nccl_payload" not in done.mechanisms
    assert done.nccl_on_hot_path == ("all_reduce (metadata)",)
