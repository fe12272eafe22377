"""Host costs and kernel kinds learnt from real programs (pkbsim.validation.programs) and
written by `pkbsim calibrate` into a topology the simulator then uses."""

from __future__ import annotations

import math

import pytest
from paths import ROOT

from pkbsim.errors import PkbsimError, TopologyError
from pkbsim.topology import load_topology
from pkbsim.topology.loader import parse_topology
from pkbsim.trace.cost import kernel_time_s
from pkbsim.trace.program import KernelGroup
from pkbsim.validation import programs
from pkbsim.validation.calibrate import calibrate
from pkbsim.validation.results import CaseResult, Measurement, Results, measurement

TRUE = {"call": 9.0, "view": 4.0, "kernel": 15.0, "library": 11.0, "collective": 40.0,
        "sync": 30.0}


def _ref(problem: str, rows: int, time_us: float, rep: int = 0, issue: float | None = None
         ) -> Measurement:
    return measurement("pkb_reference", 1024, [time_us], problem=problem, rows=rows, cols=1024,
                       rep=rep, host_issue_us=time_us if issue is None else issue)


def _synthetic_rows(problems: list[str]) -> list[Measurement]:
    """PKB-like rows whose time is exactly the true host costs x their traced counts."""
    out = []
    for problem in problems:
        for rows in (1024, 4096):
            counts = programs.traced_counts(problem, rows, 1024)
            if counts is None:
                continue
            t = sum(counts[c] * TRUE[c] for c in programs.HOST_PARAMS)
            out += [_ref(problem, rows, t * 0.9, 0), _ref(problem, rows, t / 0.9, 1)]
    return out


PROBLEMS = ["1_allreduce", "3_broadcast", "9_layernorm_backward", "11_allgather_gemm_AT",
            "13_gemm_allreduce", "15_combined_sharded_gemms", "17_rope_allgather",
            "21_clip_grad_norm_no_ep", "23_grad_acc_loss", "25_importance_sampling_loss",
            "29_moe_post_all2all", "31_fused_moe_fwd", "39_ulysses_attention_e2e",
            "41_zero1_optimizer_shard",
            "43_fused_adam_grad_unshard_allgather", "45_reducescatter_fused_rmsnorm",
            "47_fsdp_step_e2e", "57_ring_attention_backward_dp",
            "59_physicsnemo_distributed_rfft",
            "63_deepmd_kalman_filter_optimizer", "73_vocab_parallel_cross_entropy_loss",
            "81_sam3_allgather_iou_suppression", "83_vocab_parallel_log_prob_topk_chunked",
            "85_distributed_sample_sort", "2_allgather", "40_ddp"]


def test_program_rows_take_the_geometric_mean_and_the_traced_counts() -> None:
    rows = programs.program_rows([_ref("1_allreduce", 1024, 40.0, 0),
                                  _ref("1_allreduce", 1024, 90.0, 1, issue=10.0)])
    (row,) = rows
    assert row.time_us == pytest.approx(60.0)  # sqrt(40 x 90)
    assert row.reps == (40.0, 90.0) and row.fit_half and row.pid == 1
    assert row.host_issue_us == pytest.approx(25.0)  # the median of 40 and 10
    assert not row.host_bound  # 25 < 0.7 x 60
    assert row.counts is not None and row.counts["call"] == 1.0
    assert row.counts["collective"] >= 1  # problem 1 calls all_reduce


def test_host_fit_recovers_known_costs_from_the_odd_half_only() -> None:
    ms = _synthetic_rows(PROBLEMS)
    rows = programs.program_rows(ms)
    fit = programs.fit_host_costs(rows, keep=dict.fromkeys(programs.HOST_PARAMS, 1.0))
    assert fit.rows == sum(1 for r in rows if r.fit_half and r.counts)
    for c in programs.HOST_PARAMS:
        if c not in fit.skipped:
            assert fit.costs_us[c] == pytest.approx(TRUE[c], rel=0.02), c
    # an even (held-out) problem changes nothing, however wrong its time
    noisy = [*ms, _ref("2_allgather", 1024, 1e6, 2), _ref("40_ddp", 1024, 1.0, 2)]
    again = programs.fit_host_costs(programs.program_rows(noisy),
                                    keep=dict.fromkeys(programs.HOST_PARAMS, 1.0))
    assert again.costs_us == pytest.approx(fit.costs_us, rel=1e-6)


def test_host_fit_keeps_a_class_with_too_few_rows_and_refuses_no_data() -> None:
    ms = _synthetic_rows(["1_allreduce", "3_broadcast"])
    fit = programs.fit_host_costs(programs.program_rows(ms),
                                  keep=dict.fromkeys(programs.HOST_PARAMS, 7.5))
    assert fit.skipped and all(fit.costs_us[c] == 7.5 for c in fit.skipped)
    device_bound = [_ref("1_allreduce", 1024, 100.0, issue=5.0)]
    with pytest.raises(PkbsimError, match="host-bound"):
        programs.fit_host_costs(programs.program_rows(device_bound),
                                keep=dict.fromkeys(programs.HOST_PARAMS, 1.0))


def _kernel(kind: str, op: str, n: int, time_us: float, kernels: int = 1,
            flops: float = 0.0, tc: bool = False, rep: int = 0) -> Measurement:
    params = {"kind": kind, "op": op, "shape": f"[{n}]", "dtype": "float32",
              "kernels": kernels, "flops": flops, "tensor_core": tc, "timing": "graph",
              "calls": 10, "rep": rep}
    return Measurement("kernel_kind", n, time_us, None, 1, time_us, time_us, params)


def test_kernel_kind_fit_recovers_rate_and_fixed_cost() -> None:
    topo = load_topology("dgx-h100")
    rate = topo.gpu.hbm_Bps
    ms = [_kernel("scan", "aten.cumsum", n, (topo.latency.kernel_launch_us + 3.0) +
                  n / (rate * 0.4) * 1e6) for n in (2**k for k in range(12, 30, 2))]
    points = programs.kernel_points(ms)
    assert sum(on for _, on in points["scan"]) == 5  # the even positions of 9 sizes
    fit = programs.fit_kernel_kind("scan", points["scan"], topo)
    assert fit is not None and fit.memory_efficiency == pytest.approx(0.4, rel=1e-3)
    assert fit.fixed_us == pytest.approx(3.0, rel=1e-3) and fit.compute_efficiency is None
    # held out: the model reproduces the odd positions exactly
    for m, on_fit in points["scan"]:
        if not on_fit:
            model = programs.kernel_model_us(m, fit, topo, 0.4, 1.0)
            assert model == pytest.approx(m.time_us, rel=1e-3)


def test_kernel_kind_fit_of_a_compute_kind_uses_flops() -> None:
    topo = load_topology("dgx-h100")
    peak = topo.gpu.peak_tflops["bf16_tensor"] * 1e12
    ms = [_kernel("gemm", "aten.mm", 3 * 2 * n * n, 5.0 + 2 * n**3 / (peak * 0.6) * 1e6,
                  flops=2 * n**3, tc=True) for n in (256, 512, 1024, 2048, 4096, 8192)]
    fit = programs.fit_kernel_kind("gemm", programs.kernel_points(ms)["gemm"], topo)
    assert fit is not None and fit.compute_efficiency == pytest.approx(0.6, rel=1e-3)
    assert fit.memory_efficiency is None
    too_few = programs.kernel_points(ms[:2])["gemm"]
    assert programs.fit_kernel_kind("gemm", too_few, topo) is None


def test_mixed_and_unknown_kinds_are_not_fitted() -> None:
    ms = [_kernel("copy+elementwise", "aten.sum+pow", 2**20, 10.0), _kernel("", "x", 2**20, 1.0)]
    assert programs.kernel_points(ms) == {}


def _results(ms: list[Measurement]) -> Results:
    return Results({"gpu_name": "NVIDIA H100 80GB HBM3", "gpu_count": 1, "date": "2026-12-06"},
                   (CaseResult("pkb.references", "", 1, "ok", tuple(ms)),), {},
                   "synthetic.json")


def test_calibrate_writes_host_costs_and_kernel_kinds_that_load_and_count() -> None:
    base = load_topology("dgx-h100")
    rate = base.gpu.hbm_Bps
    kernels = [_kernel("sort", "aten.sort", n, 3 * (base.latency.kernel_launch_us + 12.0 +
                                                     n / 3 / (rate * 0.1) * 1e6), kernels=3)
               for n in (2**k for k in range(14, 30, 2))]
    cal = calibrate(_results([*_synthetic_rows(PROBLEMS), *kernels]), base, name="h100-x",
                    results_sha256="0" * 64)
    topo = cal.topology
    assert topo.latency.host_launch_us == pytest.approx(TRUE["kernel"], rel=0.02)
    assert topo.latency.host_call_us == pytest.approx(TRUE["call"], rel=0.02)
    assert topo.kernels["sort"].memory_efficiency == pytest.approx(0.1, rel=1e-2)
    assert topo.kernels["sort"].fixed_us == pytest.approx(12.0, rel=1e-2)
    assert "pkb_reference" in topo.sources["latency.host_launch_us"]
    assert "kernel_kind" in topo.sources["kernels.sort.memory_efficiency"]
    # the simulator's kernel time uses the calibrated kind
    group = KernelGroup("sort", False, 1e8, 0.0, 1.0)
    assert kernel_time_s(group, topo) == pytest.approx(12e-6 + 1e8 / (rate * 0.1), rel=1e-2)
    assert kernel_time_s(group, base) != pytest.approx(kernel_time_s(group, topo), rel=1e-2)


def test_topology_kernels_section_is_validated() -> None:
    data = _topology_data()
    data["kernels"] = {"sort": {"memory_efficiency": 0.1, "fixed_us": 10}}
    topo = parse_topology(data, "t.yaml")
    assert topo.kernels["sort"].compute_efficiency == 1.0
    for bad, field in (({"sortt": {"memory_efficiency": 0.1}}, "kernels.sortt"),
                       ({"sort": {"memory_efficiency": 0}}, "kernels.sort.memory_efficiency"),
                       ({"sort": {"memory_efficiency": math.nan}},
                        "kernels.sort.memory_efficiency"),
                       ({"sort": {"memory_efficiency": 0.1, "fixed_us": -1}},
                        "kernels.sort.fixed_us"),
                       ({"sort": {"memory_efficiency": 0.1, "speed": 1}}, "kernels.sort.speed")):
        data["kernels"] = bad
        with pytest.raises(TopologyError) as err:
            parse_topology(data, "t.yaml")
        assert err.value.field == field, (bad, err.value.one_line())


def _topology_data() -> dict[str, object]:
    import yaml

    return dict(yaml.safe_load((ROOT / "topologies" / "dgx-h100.yaml").read_text()))


def test_mangled_params_are_left_out_not_a_traceback() -> None:
    bad = [Measurement("pkb_reference", 1, 10.0, None, 1, 10.0, 10.0,
                       {"problem": "1_allreduce", "rows": "x", "cols": 1024}),
           Measurement("pkb_reference", 1, 10.0, None, 1, 10.0, 10.0,
                       {"problem": "1_allreduce", "rows": 1024, "host_issue_us": "fast"}),
           Measurement("pkb_reference", 1, 10.0, None, 1, 10.0, 10.0,
                       {"problem": 7, "rows": 1024}),
           Measurement("kernel_kind", 1, 1.0, None, 1, 1.0, 1.0,
                       {"kind": "sort", "kernels": "three", "flops": 1}),
           Measurement("kernel_kind", 1, 1.0, None, 1, 1.0, 1.0,
                       {"kind": "sort", "kernels": 1, "flops": -5})]
    rows = programs.program_rows(bad)
    assert [(r.problem, r.rows, r.host_issue_us) for r in rows] == [("1_allreduce", 1024, 0.0)]
    assert programs.kernel_points(bad) == {}
    cal = calibrate(_results(bad), load_topology("dgx-h100"), name="x", results_sha256="")
    assert "latency.host_launch_us" in cal.skipped  # no host-bound row: said, not raised
