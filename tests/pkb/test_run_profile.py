"""Run profiles (rank_<r>_profile.json): the reader on the H200 recordings of four problem-1
candidates (tests/data/run_profiles, from docs/measurements/pkb_run_profile_h200_w1) and on every
kind of malformed file; validate/pkb_run.py's event classification on stand-in events."""

from __future__ import annotations

import copy
import importlib.util
import json
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from paths import DATA, ROOT

from pkbsim.pkb.run_profile import (
    SCHEMA,
    ProfiledOp,
    RunProfile,
    RunProfileError,
    load_run_profile,
    load_run_profiles,
)

PROFILES = DATA / "run_profiles"
LOGS = PROFILES / "logs" / "problem_1_allreduce"
GOOD: dict[str, Any] = {
    "schema": SCHEMA, "rank": 1, "world_size": 2, "variant": "candidate",
    "solution": "/x/1_allreduce_cuda.py", "device": "cuda", "iterations": 4,
    "torch_version": "2.11.0+cu130", "nccl_version": "2.28.9",
    "kernels": [{"name": "k", "per_call": 2.0, "gpu_us_per_call": 3.5}],
    "nccl_kernels": [{"name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "per_call": 1.0,
                      "gpu_us_per_call": 9.0},
                     {"name": "ncclDevKernel_AllGather_RING_LL", "per_call": 0.5,
                      "gpu_us_per_call": None}],
    "memcpy": [{"kind": "PtoP", "per_call": 1.0, "gpu_us_per_call": 2.0,
                "bytes_per_call": 2097152},
               {"kind": "DtoD", "per_call": 0.25, "gpu_us_per_call": 1.0,
                "bytes_per_call": None}],
    "memset": [{"kind": "memset", "per_call": 1, "gpu_us_per_call": 0.5}],
    "runtime": [{"name": "cudaMemcpyPeerAsync", "per_call": 1.0},
                {"name": "cudaLaunchKernel", "per_call": 3.0}],
    "collectives": [{"name": "c10d::allreduce_", "per_call": 1.0}],
}


def write(folder: Path, data: Any, name: str = "rank_1_profile.json") -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


# --- the recorded files ------------------------------------------------------------------------

def test_recorded_profiles_of_four_candidates() -> None:
    profiles = {p.backend: p for p in load_run_profiles(PROFILES)}
    assert list(profiles) == ["dtype_fallback", "except_fallback", "memcpy_peer", "nccl",
                              "reference"]  # by folder
    for backend, p in profiles.items():
        assert (p.problem, p.rank, p.world_size, p.iterations) == ("1_allreduce", 0, 1, 10)
        assert (p.device, p.torch_version, p.nccl_version) == ("cuda", "2.11.0+cu130", "2.28.9")
        assert p.variant == ("reference" if backend == "reference" else "candidate")
        assert p.error is None and p.memset == ()
        assert p.file == str(LOGS / backend / "rank_0_profile.json")
        # at W = 1 NCCL's all-reduce launches no kernel: only the host's c10d op shows it
        assert p.nccl_kernels == () and p.nccl_per_call() == 0
        called = p.collectives_per_call("c10d::allreduce_")
        assert called == (1.0 if backend in ("nccl", "except_fallback", "reference") else 0.0)
        assert all(op.bytes_per_call is None for op in p.memcpy)  # torch 2.11 gives no bytes
    assert profiles["reference"].solution is None
    assert profiles["nccl"].solution is not None
    assert profiles["nccl"].solution.endswith("1_allreduce_nccl.py")
    for backend in ("nccl", "except_fallback", "reference"):  # the clone, then NCCL
        p = profiles[backend]
        assert p.memcpy_per_call("DtoD") == 1.0 and p.memcpy_per_call("PtoP") == 0.0
        assert [(op.name, op.per_call) for op in p.runtime] == [("cudaMemcpyAsync", 1.0)]
        assert p.kernels == ()
    fallback = profiles["dtype_fallback"]  # bfloat16: tensor.mul(1), no NCCL called
    assert [op.per_call for op in fallback.kernels] == [1.0]
    assert fallback.kernels[0].name.startswith("void at::native::vectorized_elementwise_kernel")
    assert fallback.kernels[0].gpu_us_per_call == pytest.approx(1.677)
    assert fallback.memcpy_per_call() == 0 and fallback.collectives == ()
    assert fallback.runtime_per_call("cudaLaunchKernel") == 1.0
    peer = profiles["memcpy_peer"]  # one device: the peer copy runs as a DtoD memcpy
    assert peer.runtime_per_call("cudaMemcpyPeer") == 1.0
    assert peer.runtime_per_call("cudaMemcpyAsync") == 0.0
    assert peer.memcpy_per_call("DtoD") == 1.0 and peer.memcpy_per_call("PtoP") == 0.0
    assert peer.memcpy[0].gpu_us_per_call == pytest.approx(1.3695)


def test_the_docs_copy_is_the_tests_copy() -> None:
    docs = ROOT / "docs" / "measurements" / "pkb_run_profile_h200_w1" / "run1"
    for path in sorted(PROFILES.rglob("rank_*_profile.json")):
        assert (docs / path.relative_to(PROFILES)).read_bytes() == path.read_bytes()
    second = load_run_profiles(docs.parent)  # both passes: the counts did not move
    counts = {(p.backend, p.variant): set() for p in second}
    for p in second:
        counts[(p.backend, p.variant)].add(
            (p.nccl_per_call(), p.memcpy_per_call(), tuple((o.name, o.per_call) for o in p.runtime),
             p.collectives_per_call(), tuple(o.per_call for o in p.kernels)))
    assert len(second) == 13 and all(len(c) == 1 for c in counts.values())


# --- the reader on its own ---------------------------------------------------------------------

def test_a_good_file_and_its_totals(tmp_path: Path) -> None:
    path = write(tmp_path / "logs" / "problem_1_allreduce" / "cuda", GOOD)
    p = load_run_profile(path)
    assert (p.problem, p.backend, p.rank, p.world_size, p.iterations) == (
        "1_allreduce", "cuda", 1, 2, 4)
    assert p.memcpy[0] == ProfiledOp("PtoP", 1.0, 2.0, 2097152.0)
    assert p.memset == (ProfiledOp("memset", 1.0, 0.5),)
    assert p.runtime[0] == ProfiledOp("cudaMemcpyPeerAsync", 1.0)
    assert p.nccl_kernels[1].gpu_us_per_call is None
    assert p.nccl_per_call() == 1.5
    assert p.memcpy_per_call() == 1.25 and p.memcpy_per_call("PtoP") == 1.0
    assert p.memcpy_per_call("DtoD", "PtoP") == 1.25 and p.memcpy_per_call("HtoD") == 0
    assert p.runtime_per_call("cudaMemcpy") == 1.0 and p.runtime_per_call("cu") == 4.0
    assert p.collectives_per_call() == 1.0 and p.collectives_per_call("c10d::allgather") == 0
    assert load_run_profiles(path) == [p]


def test_optional_fields_and_the_path(tmp_path: Path) -> None:
    data = {k: v for k, v in GOOD.items()
            if k not in ("collectives", "device", "torch_version", "nccl_version")}
    data.update(error="RuntimeError: CUPTI failed", solution=None, kernels=[], extra=[1])
    p = load_run_profile(write(tmp_path, data))  # not PKB's layout: no problem or backend
    assert (p.problem, p.backend, p.error, p.solution) == (None, None,
                                                           "RuntimeError: CUPTI failed", None)
    assert (p.device, p.torch_version, p.nccl_version, p.collectives) == (None, None, None, ())
    assert isinstance(p, RunProfile) and p.kernels == ()
    other = load_run_profile(write(tmp_path / "problem_" / "b", GOOD, "profile.json"))
    assert (other.problem, other.backend) == (None, None)  # "problem_" names no stem


def test_folders_are_searched_by_folder_then_rank(tmp_path: Path) -> None:
    for rank in (10, 2, 0):
        write(tmp_path / "logs" / "problem_1_x" / "cuda",
              {**GOOD, "rank": rank, "world_size": 11}, f"rank_{rank}_profile.json")
    write(tmp_path / "logs" / "problem_1_x" / "a", {**GOOD, "rank": 0}, "rank_0_profile.json")
    (tmp_path / "logs" / "rank_0_perf.json").write_text("{}")  # other files are left alone
    found = load_run_profiles(tmp_path)
    assert [(p.backend, p.rank) for p in found] == [("a", 0), ("cuda", 0), ("cuda", 2),
                                                    ("cuda", 10)]


def test_folder_and_path_errors(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(RunProfileError, match=r"no rank_<r>_profile\.json found") as info:
        load_run_profiles(tmp_path / "empty")
    assert info.value.file == str(tmp_path / "empty")
    with pytest.raises(RunProfileError, match="no such file or folder"):
        load_run_profiles(tmp_path / "missing")
    write(tmp_path / "odd", GOOD, "rank_x_profile.json")
    with pytest.raises(RunProfileError, match="expected a file name rank_<integer>_profile"):
        load_run_profiles(tmp_path / "odd")
    with pytest.raises(RunProfileError, match="no such file"):
        load_run_profile(tmp_path / "missing.json")


def changed(edit: Any) -> dict[str, Any]:
    data = copy.deepcopy(GOOD)
    edit(data)
    return data


MALFORMED: list[tuple[Any, str | None, str]] = [
    ("{", None, "not JSON"),
    ('{"rank": NaN}', None, "not JSON"),
    ("[1, 2]", None, "expected a JSON object"),
    (changed(lambda d: d.update(schema="pkbsim.runprofile/2")), "schema", "expected 'pkbsim"),
    (changed(lambda d: d.pop("schema")), "schema", "got None"),
    (changed(lambda d: d.pop("rank")), "rank", "missing"),
    (changed(lambda d: d.update(rank="1")), "rank", "expected an integer, got '1'"),
    (changed(lambda d: d.update(rank=True)), "rank", "expected an integer, got True"),
    (changed(lambda d: d.update(rank=-1)), "rank", "expected 0 or more, got -1"),
    (changed(lambda d: d.update(world_size=1)), "world_size", "expected 0 <= rank < world"),
    (changed(lambda d: d.update(world_size=0, rank=0)), "world_size", "rank 0 of world_size"),
    (changed(lambda d: d.update(rank=0)), "rank", "the file is named for rank 1"),
    (changed(lambda d: d.update(iterations=-3)), "iterations", "expected 0 or more"),
    (changed(lambda d: d.update(iterations=2.5)), "iterations", "expected an integer"),
    (changed(lambda d: d.pop("variant")), "variant", "missing"),
    (changed(lambda d: d.update(variant="")), "variant", "empty"),
    (changed(lambda d: d.update(variant=None)), "variant", "expected a string, got None"),
    (changed(lambda d: d.update(solution=5)), "solution", "expected a string or null"),
    (changed(lambda d: d.pop("solution")), "solution", "missing"),
    (changed(lambda d: d.update(error=["x"])), "error", "expected a string or null"),
    (changed(lambda d: d.update(device=1)), "device", "expected a string or null"),
    (changed(lambda d: d.pop("kernels")), "kernels", "missing"),
    (changed(lambda d: d.update(runtime={})), "runtime", "expected a list, got {}"),
    (changed(lambda d: d.update(collectives="c10d")), "collectives", "expected a list"),
    (changed(lambda d: d["kernels"].append(3)), "kernels[1]", "expected an object, got 3"),
    (changed(lambda d: d["kernels"][0].pop("name")), "kernels[0].name", "missing"),
    (changed(lambda d: d["kernels"][0].update(name="")), "kernels[0].name", "empty"),
    (changed(lambda d: d["memcpy"][0].pop("kind")), "memcpy[0].kind", "missing"),
    (changed(lambda d: d["memcpy"][0].update(kind=7)), "memcpy[0].kind", "expected a string"),
    (changed(lambda d: d["nccl_kernels"][0].pop("per_call")), "nccl_kernels[0].per_call",
     "missing"),
    (changed(lambda d: d["runtime"][1].update(per_call="1")), "runtime[1].per_call",
     "expected a number, got '1'"),
    (changed(lambda d: d["runtime"][0].update(per_call=None)), "runtime[0].per_call",
     "expected a number, got None"),
    (changed(lambda d: d["memset"][0].update(per_call=-1)), "memset[0].per_call",
     "expected a number >= 0, got -1"),
    (changed(lambda d: d["memcpy"][1].update(per_call=False)), "memcpy[1].per_call",
     "expected a number, got False"),
    (changed(lambda d: d["memcpy"][0].update(bytes_per_call=-2)), "memcpy[0].bytes_per_call",
     "expected a number >= 0"),
    (changed(lambda d: d["memcpy"][0].pop("bytes_per_call")), "memcpy[0].bytes_per_call",
     "missing"),
    (changed(lambda d: d["kernels"][0].update(gpu_us_per_call="3")),
     "kernels[0].gpu_us_per_call", "expected a number or null"),
    (changed(lambda d: d["memset"][0].pop("gpu_us_per_call")), "memset[0].gpu_us_per_call",
     "missing"),
    (changed(lambda d: d["collectives"][0].update(name=None)), "collectives[0].name",
     "expected a string, got None"),
]


@pytest.mark.parametrize(("data", "field", "message"), MALFORMED)
def test_each_malformed_file_is_one_error(tmp_path: Path, data: Any, field: str | None,
                                          message: str) -> None:
    path = write(tmp_path, data)
    with pytest.raises(RunProfileError) as info:
        load_run_profiles(tmp_path)
    error = info.value
    assert (error.file, error.field) == (str(path), field)
    assert message in error.message
    assert "\n" not in error.one_line() and str(path) in error.one_line()


def test_a_file_over_the_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, GOOD)
    monkeypatch.setenv("PKBSIM_MAX_RANK_FILE_BYTES", "100")
    with pytest.raises(RunProfileError, match="over the limit of 100 bytes") as info:
        load_run_profile(path)
    assert info.value.file == str(path)
    (tmp_path / "folder_profile.json").mkdir()
    monkeypatch.delenv("PKBSIM_MAX_RANK_FILE_BYTES")
    with pytest.raises(RunProfileError, match="is a folder"):
        load_run_profile(tmp_path / "folder_profile.json")


# --- validate/pkb_run.py: what it records ------------------------------------------------------

@pytest.fixture(scope="module")
def script() -> ModuleType:
    pytest.importorskip("torch")
    spec = importlib.util.spec_from_file_location("pkb_run_profiled",
                                                  ROOT / "validate" / "pkb_run.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def event(name: str, device: str, activity: str | None = None, us: float = 1.0,
          annotation: bool = False, **meta: Any) -> SimpleNamespace:
    from torch.profiler import DeviceType

    return SimpleNamespace(name=name, device_type=getattr(DeviceType, device),
                           activity_type=activity, is_user_annotation=annotation,
                           time_range=SimpleNamespace(start=10.0, end=10.0 + us), **meta)


def test_events_are_classified_and_counted_per_call(script: ModuleType, tmp_path: Path) -> None:
    events = [
        event("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "CUDA", "kernel", 9.0),
        event("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "CUDA", "kernel", 7.0),
        event("nccl:all_reduce", "CUDA", "gpu_user_annotation", 20.0, annotation=True),
        event("Context Sync", "CUDA", "cuda_sync", 3.0),
        event("void at::native::elementwise_kernel<128>", "CUDA", None, 3.0),  # torch 2.11
        event("Memcpy PtoP (Device -> Device)", "CUDA", "gpu_memcpy", 2.0,
              extra_meta={"bytes": 1024}),
        event("Memcpy PtoP (Device -> Device)", "CUDA", None, 2.0,
              metadata_json='"device": 0, "bytes": 3072, "memory bandwidth (GB/s)": 1.5'),
        event("Memcpy DtoD (Device -> Device)", "CUDA", None, 1.0),  # no bytes given
        event("Memcpy HtoD (Pageable -> Device)", "CUDA", None, 1.0,
              event_metadata=SimpleNamespace(bytes=8)),
        event("Memset (Device)", "CUDA", "gpu_memset", 0.5),
        event("cudaMemcpyPeerAsync", "CPU", "cuda_runtime"),
        event("cudaLaunchKernel", "CPU", None),
        event("cudaLaunchKernel", "CPU", None),
        event("cuLaunchKernelEx", "CPU", "cuda_driver"),
        event("cudaStreamSynchronize", "CPU", "cuda_runtime"),  # not one that copies or launches
        event("c10d::allreduce_", "CPU", "cpu_op"),
        event("aten::clone", "CPU", "cpu_op"),
    ]
    lists = script.summarize_events(events, 2)
    assert lists["nccl_kernels"] == [{"name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
                                      "per_call": 1.0, "gpu_us_per_call": 8.0}]
    assert lists["kernels"] == [{"name": "void at::native::elementwise_kernel<128>",
                                 "per_call": 0.5, "gpu_us_per_call": 1.5}]
    assert lists["memcpy"] == [
        {"kind": "PtoP", "per_call": 1.0, "gpu_us_per_call": 2.0, "bytes_per_call": 2048.0},
        {"kind": "DtoD", "per_call": 0.5, "gpu_us_per_call": 0.5, "bytes_per_call": None},
        {"kind": "HtoD", "per_call": 0.5, "gpu_us_per_call": 0.5, "bytes_per_call": 4.0}]
    assert lists["memset"] == [{"kind": "memset", "per_call": 0.5, "gpu_us_per_call": 0.25}]
    assert lists["runtime"] == [{"name": "cudaLaunchKernel", "per_call": 1.0},
                                {"name": "cuLaunchKernelEx", "per_call": 0.5},
                                {"name": "cudaMemcpyPeerAsync", "per_call": 0.5}]
    assert lists["collectives"] == [{"name": "c10d::allreduce_", "per_call": 0.5}]
    record = {"schema": SCHEMA, "rank": 0, "world_size": 1, "variant": "candidate",
              "solution": None, "device": "cuda", "iterations": 2, "torch_version": "t",
              "nccl_version": None, **lists}
    p = load_run_profile(write(tmp_path, record, "rank_0_profile.json"))  # the reader takes it
    assert p.nccl_per_call() == 1.0 and p.memcpy_per_call("PtoP") == 1.0
    assert p.runtime_per_call("cudaMemcpyPeer") == 0.5


def test_a_failing_profile_is_written_not_raised(script: ModuleType, tmp_path: Path) -> None:
    import torch

    def broken(*args: Any) -> None:
        raise RuntimeError("CUPTI_ERROR_NOT_INITIALIZED\n  at line 2")

    record = script.profile_record(broken, (), torch.device("cpu"), 3)
    assert record["error"] == "RuntimeError: CUPTI_ERROR_NOT_INITIALIZED at line 2"
    assert (record["device"], record["iterations"], record["nccl_version"]) == ("cpu", 3, None)
    assert all(record[k] == [] for k in ("kernels", "nccl_kernels", "memcpy", "memset",
                                         "runtime", "collectives"))
    full = {"schema": SCHEMA, "rank": 0, "world_size": 1, "variant": "reference",
            "solution": None, **record}
    assert load_run_profile(write(tmp_path, full, "rank_0_profile.json")).error is not None
