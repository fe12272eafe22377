"""Traces fold into programs; the simulator charges each traced operator its class's cost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pkbsim.errors import UsageError
from pkbsim.sim.run import run_simulation
from pkbsim.topology import load_topology
from pkbsim.trace.format import load_trace, trace_from_dict, trace_to_dict
from pkbsim.trace.program import program_from_dict, program_of, program_to_dict
from pkbsim.trace.store import load_points


def op(name: str, cls: str, **extra: object) -> dict[str, object]:
    return {"op": name, "class": cls, **extra}


TRACE = {
    "format": "pkbsim-trace", "version": 1, "meta": {"world_size": 2},
    "ops": [
        op("aten.view.default", "view"),
        op("aten.mm.default", "library", kind="gemm", kernels=1, read_bytes=200,
           write_bytes=100, flops=4000, tensor_core=True),
        op("c10d.allreduce_.default", "collective",
           collective={"name": "all_reduce", "group_size": 2, "bytes": 100}),
        op("aten.add.Tensor", "kernel", kind="elementwise", kernels=1, read_bytes=200,
           write_bytes=100, flops=50),
        op("aten._local_scalar_dense.default", "sync", sync=True),
        op("aten.add.Tensor", "kernel", kind="elementwise", kernels=1, read_bytes=200,
           write_bytes=100, flops=50),
        op("aten._local_scalar_dense.default", "sync", sync=True),
    ],
}


def test_a_trace_folds_into_segments_at_its_boundaries() -> None:
    program = program_of(trace_from_dict(TRACE, "t.json"))
    ends = [(s.end, s.times) for s in program.segments]
    # view + mm | all_reduce ; add | sync (twice, stored once) ; end
    assert ends == [("collective", 1), ("sync", 2), ("end", 1)]
    totals = program.totals()
    assert totals["kernels"] == 3 and totals["sync"] == 2 and totals["collective"] == 1
    assert totals["bytes"] == 300 + 2 * 300 and totals["flops"] == 4000 + 2 * 50
    assert program_from_dict(program_to_dict(program), None).segments == program.segments


def test_trace_round_trips_and_bad_fields_are_named() -> None:
    trace = trace_from_dict(TRACE, "t.json")
    assert trace_from_dict(trace_to_dict(trace), "t.json").ops == trace.ops
    bad = json.loads(json.dumps(TRACE))
    bad["ops"][2]["collective"]["group_size"] = 0
    with pytest.raises(UsageError) as err:
        trace_from_dict(bad, "t.json")
    assert err.value.one_line() == "t.json: ops[2].collective.group_size: expected at least 1"
    with pytest.raises(UsageError) as err:
        trace_from_dict({**TRACE, "version": 9}, "t.json")
    assert "t.json: version:" in err.value.one_line()


def test_host_bound_reference_is_the_sum_of_its_class_costs() -> None:
    """GRPO at PKB's size, W = 8: the call's own cost, every traced operator at its class's
    host cost, one collective call each, nothing on the GPU long enough to matter (closed
    form)."""
    r = run_simulation("grpo", "nccl_reference", "dgx-h100", 8, "pkb")
    chosen = r.strategy.program
    assert chosen is not None and chosen.how == "exact"
    lat = load_topology("dgx-h100").latency
    totals = chosen.program.totals()
    expected = (lat.host_call_us + totals.get("view", 0) * lat.host_view_us
                + totals.get("kernel", 0) * lat.host_launch_us
                + totals.get("library", 0) * lat.library_us
                + totals.get("collective", 0) * lat.host_collective_us
                + totals.get("sync", 0) * lat.host_sync_us)
    assert r.bound_by == "host"
    assert r.predicted_us == pytest.approx(expected, rel=1e-9)


def test_grpo_follows_its_real_kernels_at_production_size() -> None:
    """blog-16k runs the same kernels on 16 x the logits: HBM-bound, far above blog-1k
    (the task-file model predicted both at the same host-bound time)."""
    small = run_simulation("grpo", "nccl_reference", "dgx-h100", None, "blog-1k")
    large = run_simulation("grpo", "nccl_reference", "dgx-h100", None, "blog-16k")
    assert large.strategy.program is not None and large.strategy.program.how == "exact"
    assert large.bound_by == "gpu" and small.bound_by == "host"
    assert large.predicted_us > 4 * small.predicted_us  # blog-1k: 4 chunks of host work
    old_small = run_simulation("grpo", "nccl_reference", "dgx-h100", None, "blog-1k",
                               reference_model="task")
    old_large = run_simulation("grpo", "nccl_reference", "dgx-h100", None, "blog-16k",
                               reference_model="task")
    assert old_small.predicted_us == pytest.approx(old_large.predicted_us)


def test_an_instance_no_traced_points_vary_to_scales_the_nearest_one() -> None:
    """llama70b-tp8 sets shapes PKB's M and N cannot: the nearest point, one ratio each for
    bytes, FLOPs and collective bytes, and a warning saying why."""
    r = run_simulation("13", "nccl_reference", "dgx-h100", 8, "llama70b-tp8")
    chosen = r.strategy.program
    assert chosen is not None and chosen.how == "scaled"
    assert chosen.point.world_size == 8 and "cannot express it" in chosen.warning
    bytes_ratio = chosen.ratios[0]
    assert bytes_ratio > 1
    base = chosen.sources[0]
    scaled = sum(k.bytes * k.count for s in chosen.program.segments for k in s.kernels)
    traced = sum(k.bytes * k.count for s in base.program.segments for k in s.kernels)
    assert scaled == pytest.approx(traced * bytes_ratio)


def test_every_shipped_program_loads_with_provenance() -> None:
    folder = Path(__file__).resolve().parents[2] / "tasks" / "traces"
    files = sorted(folder.glob("*.json"))
    assert len(files) >= 80
    for path in files:
        points = load_points(path.stem)
        assert points, path
        raw = json.loads(path.read_text())
        for p in raw["points"]:
            assert p["provenance"].get("torch"), path


def test_reference_model_task_and_trace_are_selectable() -> None:
    task = run_simulation("13", "nccl_reference", reference_model="task")
    assert task.strategy.program is None
    with pytest.raises(UsageError, match="no traced reference"):
        run_simulation("19", "nccl_reference", reference_model="trace")
    with pytest.raises(UsageError, match="reference-model"):
        run_simulation("13", "nccl_reference", reference_model="guess")


def test_trace_file_simulates_on_any_machine(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(TRACE))
    r = run_simulation(None, "nccl_reference", "gb200-nvl72", 8, trace_file=str(path))
    assert r.instance.world_size == 8 and r.predicted_us > 0
    assert load_trace(path).world_size == 2


@pytest.mark.parametrize(("change", "field"), [
    (lambda d: d.update(format="other"), "format"),
    (lambda d: d.update(meta=[]), "meta"),
    (lambda d: d.update(ops={}), "ops"),
    (lambda d: d["ops"].append(7), "ops[7]"),
    (lambda d: d["ops"][0].update(op=""), "ops[0].op"),
    (lambda d: d["ops"][0].update({"class": "gpu"}), "ops[0].class"),
    (lambda d: d["ops"][0].update(kind=3), "ops[0].kind"),
    (lambda d: d["ops"][0].update(shapes=[1]), "ops[0].shapes"),
    (lambda d: d["ops"][1].update(flops=-1), "ops[1].flops"),
    (lambda d: d["ops"][0].update(collective={"name": "all_reduce", "group_size": 1,
                                              "bytes": 1}), "ops[0].collective"),
    (lambda d: d["ops"][2]["collective"].update(name="shout"), "ops[2].collective.name"),
    (lambda d: d["ops"][2]["collective"].update(in_splits=[-1]),
     "ops[2].collective.in_splits"),
])
def test_each_bad_trace_field_is_named(change, field: str) -> None:
    data = json.loads(json.dumps(TRACE))
    change(data)
    with pytest.raises(UsageError) as err:
        trace_from_dict(data, "t.json")
    assert err.value.field == field


def test_bad_program_files_name_the_field() -> None:
    from pkbsim.errors import TaskError
    from pkbsim.trace.store import points_from_dict

    good = {"format": "pkbsim-reference-programs", "version": 1, "points": [
        {"world_size": 1, "set": {"M": 1024}, "segments": [{"host": {"view": 1}, "end": "end"}]}]}
    assert points_from_dict(good, "p.json")[1][0].world_size == 1
    bad_cases = [
        ({**good, "version": 2}, "version"),
        ({**good, "points": {}}, "points"),
        ({**good, "points": [3]}, "points[0]"),
        ({**good, "points": [{"world_size": 0}]}, "points[0].world_size"),
        ({**good, "points": [{"world_size": 1, "set": {"M": True}}]}, "points[0].set"),
        ({**good, "points": [{"world_size": 1, "segments": [{"end": "later"}]}]},
         "points[0].segments[0].end"),
        ({**good, "points": [{"world_size": 1, "segments": [{"host": {"gpu": 1}, "end": "end"}]}]},
         "points[0].segments[0].host"),
        ({**good, "points": [{"world_size": 1, "segments": [
            {"end": "end", "kernels": [["gemm", 1, 2]]}]}]}, "points[0].segments[0].kernels[0]"),
        ({**good, "points": [{"world_size": 1, "segments": [
            {"end": "collective", "collective": {"name": "x"}}]}]},
         "points[0].segments[0].collective"),
        ({**good, "points": [{"world_size": 1, "segments": [{"end": "end", "times": 0}]}]},
         "points[0].segments[0].times"),
    ]
    for data, field in bad_cases:
        with pytest.raises(TaskError) as err:
            points_from_dict(data, "p.json")
        assert err.value.field == field, field


def test_a_copy_of_a_shipped_task_runs_the_task_file_model(tmp_path: Path) -> None:
    """Traces belong to the shipped task files: an edited copy may no longer match them."""
    src = next((Path(__file__).resolve().parents[2] / "tasks").glob("13_*.yaml"))
    copy = tmp_path / "13_gemm_allreduce.yaml"
    copy.write_text(src.read_text())
    r = run_simulation(str(copy), "nccl_reference")
    assert r.strategy.program is None


def test_kinds_and_host_classes() -> None:
    from pkbsim.trace.classes import host_class, kernels_of, kind_of

    assert [kind_of(n, False) for n in ("aten.mm", "aten.convolution", "aten._fft_r2c",
                                        "aten.linalg_qr", "aten.sort", "aten.cumsum",
                                        "aten.gather", "aten.cat", "aten.zeros", "aten.sum",
                                        "aten.whatever")] == [
        "gemm", "conv", "fft", "linalg", "sort", "scan", "index", "copy", "fill", "reduction",
        "other"]
    assert kind_of("aten.add", True) == "elementwise"
    assert host_class("gemm") == "library" and host_class("sort") == "kernel"
    assert kernels_of("aten.sort") == 3 and kernels_of("aten.add") == 1
