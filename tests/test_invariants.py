"""The model's physical invariants (pkbsim/invariants.py, docs/metrics.md "Invariants"): each
checker catches a constructed violation; a deterministic sample of the grid has none (fast);
the whole grid has none but the known ones listed below (slow)."""

from __future__ import annotations

import dataclasses
import os

import pytest

from pkbsim.invariants import (
    WORLD_SIZES,
    check_finite,
    check_grid,
    check_host_calls,
    check_instance,
    check_monotone,
    check_order,
    collective_curves,
    config_steps,
    grid,
    load_grid_inputs,
    point_name,
    sample,
    skip_reason,
)
from pkbsim.sim import Strategy, simulate
from pkbsim.sim.result import SimResult
from pkbsim.task.loader import instantiate, load_task
from pkbsim.topology.loader import load_topology

# The slow test's grid: a deterministic quarter of the instances up to W = 32 (every task,
# preset and topology is still drawn), and the bare-collective curves at W <= 8 with
# W x size <= 1 GiB. The whole grid (W up to each topology's largest, curves up to 72 ranks) runs
# for 30 minutes and more on a 2-core machine: benchmarks/invariants_grid.py, its output in
# docs/measurements.md.
SLOW_MAX_W, SLOW_EVERY, SLOW_CURVE_MAX_W, SLOW_CURVE_MAX_BYTES = 32, 4, 8, 2.0**30

# ------------------------------------------------------------------ checkers catch violations

def test_order_catches_each_inequality() -> None:
    assert check_order("p", 1.0, 2.0, 3.0) == []
    assert check_order("p", 1.0, 1.0, 1.0) == []  # equal is allowed
    below_roof = check_order("p", 2.0, 1.0, 3.0)
    assert [v.detail for v in below_roof] == ["custom_best 1 us below t_roof 2 us"]
    ref_below = check_order("p", 2.0, 2.5, 0.0)
    assert {v.detail for v in ref_below} == {"nccl_reference 0 us below t_roof 2 us",
                                              "custom_best 2.5 us above nccl_reference 0 us"}
    assert all(v.invariant == "order" and v.where == "p" for v in ref_below)


def test_monotone_catches_a_fall() -> None:
    assert check_monotone("c", [1, 2, 4], [5.0, 5.0, 6.0]) == []
    (v,) = check_monotone("c", [1, 2, 4, 8], [5.0, 7.0, 6.5, 9.0])
    assert v.invariant == "monotone" and "6.5 us at 4 B < 7 us at 2 B" in v.detail


def test_monotone_counts_nccl_falls_only_where_nccl_runs_the_call_the_same_way() -> None:
    sizes, times = [1, 2, 4], [5.0, 4.0, 3.0]
    configs = ["ring/LL/1ch", "ring/LL/1ch", "ring/LL128/1ch"]
    (v,) = check_monotone("c", sizes, times, configs)
    assert "4 us at 2 B < 5 us at 1 B" in v.detail
    (step,) = config_steps("c", sizes, times, configs)
    assert "(ring/LL/1ch -> ring/LL128/1ch)" in step.detail


def test_nccl_on_more_channels_is_not_faster_than_a_smaller_call_on_fewer() -> None:
    """NCCL's chunk is per channel: a ring LL broadcast at 32 KiB on 1 channel and at 256 KiB
    on 8 move the same chunk per channel (a 256 KiB call once ran 11.2 us against 13.7)."""
    topo = load_topology("dgx-h100")
    (curve,) = [c for c in collective_curves(topo, ("broadcast",), [2**e for e in range(13, 21)],
                                             [8]) if c.configs is not None]
    assert {c.rsplit("/", 1)[0] for c in curve.configs} == {"ring/LL"}
    assert len(set(curve.configs)) > 1  # 1 to 16 channels
    assert check_monotone(curve.where, curve.sizes, curve.times_us) == []  # channels ignored


def _result(task: str = "13", w: int = 4, strategy: str = "nccl_reference") -> SimResult:
    topo = load_topology("dgx-h100")
    return simulate(instantiate(load_task(task), w, "pkb"), topo, Strategy(strategy))


def test_host_call_catches_a_collective_issued_for_free() -> None:
    result = _result()
    host_us = result.topology.latency.host_collective_us
    assert check_host_calls("p", result, host_us) == []
    calls = [i for i, n in enumerate(result.nodes) if n.work == "collective_call"]
    assert calls, "the reference issues its collectives from the host"
    nodes = list(result.nodes)
    first = nodes[calls[0]]
    nodes[calls[0]] = dataclasses.replace(first, end_us=first.start_us + host_us / 2)
    cheap = dataclasses.replace(result, nodes=tuple(nodes))
    (v,) = check_host_calls("p", cheap, host_us)
    assert v.invariant == "host_call" and f"< {host_us:g} us" in v.detail
    gone = dataclasses.replace(result, nodes=tuple(n for i, n in enumerate(result.nodes)
                                                    if i != calls[0]))
    (v,) = check_host_calls("p", gone, host_us)
    assert "has no host call" in v.detail


def test_finite_catches_negative_and_nan_times() -> None:
    result = _result()
    assert check_finite("p", "nccl_reference", result) == []
    nan = dataclasses.replace(result, predicted_us=float("nan"))
    assert [v.values[0][0] for v in check_finite("p", "s", nan)] == ["predicted_us"]
    seg = result.critical_path[0]
    early = dataclasses.replace(seg, start_us=result.iteration_start_us - 0.78)
    before = dataclasses.replace(result, critical_path=(early, *result.critical_path[1:]))
    (v,) = check_finite("p", "s", before)
    assert "start from the iteration's start" in v.detail and v.values[0][1] == pytest.approx(
        -0.78)
    op = dataclasses.replace(result.ops[0], gpu_us=-1.0)
    assert check_finite("p", "s", dataclasses.replace(result, ops=(op, *result.ops[1:])))


def test_skip_reasons_are_categories() -> None:
    assert skip_reason("task 27 cannot run at world size 3: constraint 'M % W == 0' fails (...)"
                       ) == "task: world-size constraint fails"
    assert skip_reason("task 9 cannot run at world size 3: group 'tp' has size 2, which must "
                       "divide 3") == "task: a group's size does not divide W"
    assert skip_reason("no algorithm and mechanism on x can carry all_reduce (op ar)"
                       ).startswith("topology: ")


# ------------------------------------------------------------------ regressions (issue 29)

def test_critical_path_starts_at_or_after_the_iterations_start() -> None:
    """The host issues iteration N while the GPU still runs N - 1: the listing counts from the
    first moment any rank began the iteration, not from the previous iteration's end."""
    result = _result("13", 8)
    assert result.critical_path[0].start_us >= result.iteration_start_us
    assert result.iteration_start_us < result.window_us[0]  # the host ran ahead
    assert min(op.start_us for op in result.ops) >= 0


@pytest.mark.parametrize("task", ["27", "33", "34", "35", "67"])
def test_a_reference_that_returns_at_once_still_costs_the_timed_call(task: str) -> None:
    """At W = 1 these references return their input (PKB's code); PKB still times the call
    and the CUDA event after it (latency.host_call_us)."""
    topo = load_topology("dgx-h100")
    result = simulate(instantiate(load_task(task), 1, "pkb"), topo, Strategy("nccl_reference"))
    assert result.predicted_us == pytest.approx(topo.latency.host_call_us)
    assert topo.latency.host_call_us > 0


@pytest.mark.parametrize("task", ["27", "33", "34", "35", "67"])
def test_with_nothing_to_do_the_best_kernel_launches_nothing(task: str) -> None:
    """At W = 1 these tasks have nothing to do: custom_best launched its fused kernel anyway
    (15.1 us, above the reference's 10.73 us timed call)."""
    topo = load_topology("dgx-h100")
    inst = instantiate(load_task(task), 1, "pkb")
    custom = simulate(inst, topo, Strategy("custom_best"))
    assert custom.predicted_us == 0.0
    assert check_instance(inst, topo, point_name(task, "pkb", 1, topo.name)).violations == ()


@pytest.mark.parametrize("w", [2, 4, 8])
def test_a_pipelines_later_stage_is_not_modelled_by_its_own_trace(w: int) -> None:
    """56's traced rank (stage 1) receives stage 0's output: its trace holds one more recv than
    sends and none of stage 0's work, so at its production preset it fell 1-6% below its own
    roofline; the task file's ops (both stages on the critical path) model it."""
    inst = instantiate(load_task("56"), w, "llama3-8b-32k")
    for topo in ("dgx-a100", "hgx-b200", "gb200-nvl72"):
        where = point_name("56", "llama3-8b-32k", w, topo)
        assert check_instance(inst, load_topology(topo), where).violations == ()


def test_a_one_rank_call_in_a_custom_kernel_costs_nothing() -> None:
    inst = instantiate(load_task("1"), 1, "nccl-1gib")
    where = point_name("1", "nccl-1gib", 1, "dgx-h100")
    assert check_instance(inst, load_topology("dgx-h100"), where).violations == ()


# ------------------------------------------------------------------ the grid

def _grid_sample() -> tuple[list, dict[str, int]]:
    specs, topos = load_grid_inputs()
    points, skipped = grid(specs, topos, WORLD_SIZES, max_world_size=8)
    return sample(points, 443, 17), skipped


def test_grid_sample_has_no_violation() -> None:
    """15 instances spread over tasks, presets, W and every topology (deterministic)."""
    points, skipped = _grid_sample()
    assert len(points) >= 12
    assert len({p.spec.id for p, _ in points}) >= 12
    assert len({p.topology.name for p, _ in points}) >= 8
    report = check_grid(points, skipped)
    assert report.points == len(points)
    assert report.skipped and all(n > 0 for n in report.skipped.values())
    assert report.violations == ()


def test_collective_curves_do_not_fall_with_size_on_one_node() -> None:
    topo = load_topology("dgx-h100")
    sizes = [2**e for e in range(0, 31, 3)]
    curves = list(collective_curves(topo, ("all_reduce", "all_gather"), sizes, [8]))
    assert any(" nccl " in c.where for c in curves)
    assert len(curves) >= 5
    report = check_grid([], {}, [topo], ("all_reduce", "all_gather"), sizes)
    assert report.curves > 0 and report.violations == ()


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_grid_has_no_violation() -> None:
    specs, topos = load_grid_inputs()
    points, skipped = grid(specs, topos, WORLD_SIZES, SLOW_MAX_W)
    drawn = sample(points, SLOW_EVERY, 1)
    assert {p.spec.id for p, _ in drawn} == {s.id for s in specs}
    assert {p.topology.name for p, _ in drawn} == {t.name for t in topos}
    report = check_grid(drawn, skipped, topos, max_bytes_total=SLOW_CURVE_MAX_BYTES,
                        jobs=min(2, os.cpu_count() or 1), curve_max_world_size=SLOW_CURVE_MAX_W)
    assert report.points > 1500 and report.curves > 500
    assert not report.violations, "\n".join(str(v) for v in report.violations)
