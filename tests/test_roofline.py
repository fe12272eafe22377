"""Roofline bounds asserted against hand calculation (formulas in docs/metrics.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pkbsim.analysis import analyze
from pkbsim.errors import InfeasibleError
from pkbsim.roofline import roofline
from pkbsim.task.loader import instantiate, load_task
from pkbsim.topology import load_topology

MiB = 1 << 20
LINE = 450e9  # H100: 18 NVLink 4 links x 25 GB/s, one direction
ETA = {"ce": 0.87, "sm": 0.75, "tma": 0.78, "nvls": 0.69, "nccl": 0.82}
LAUNCH, SYNC = 0.78e-6, 0.83e-6


def one_op_task(tmp_path: Path, kind: str, nbytes: float, extra: dict | None = None,
                more_ops: list | None = None, groups: dict | None = None) -> str:
    op = {"id": "op", "kind": kind, "bytes_per_rank": nbytes, **(extra or {})}
    data = {
        "schema_version": 1, "id": 999, "name": "synthetic", "title": "synthetic",
        "source": "test", "parallelism": "test", "world_size": {"default": 8},
        "presets": {"pkb": {"description": "test"}}, "ops": [op, *(more_ops or [])],
    }
    if groups:
        data["groups"] = groups
    path = tmp_path / f"{kind}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


def bound(task: str, w: int = 8, topo: str = "dgx-h100"):
    return roofline(instantiate(load_task(task), w), load_topology(topo))


@pytest.mark.parametrize("w", [2, 4, 8])
def test_all_reduce(tmp_path: Path, w: int) -> None:
    m = 2 * MiB
    r = bound(one_op_task(tmp_path, "all_reduce", m), w)
    nvls = (w + 1) / w * m
    ring = 2 * (w - 1) / w * m
    assert r.t_comm_line_rate_s == pytest.approx(min(nvls, ring) / LINE)
    assert r.t_comm_line_rate_no_switch_reduction_s == pytest.approx(ring / LINE)
    assert r.t_comm_no_switch_reduction_s == pytest.approx(ring / (ETA["nccl"] * LINE))
    assert r.t_comm_s == pytest.approx(min(nvls / ETA["nvls"], ring / ETA["nccl"]) / LINE)
    # at W = 2 one-shot moves the same bytes as two-shot in one step and wins the tie
    expected = "nvls" if nvls / ETA["nvls"] < ring / ETA["nccl"] else (
        "one_shot" if w == 2 else "two_shot")
    assert r.comm[0].best.algorithm == expected


def test_nvls_beats_ring_at_eight(tmp_path: Path) -> None:
    r = bound(one_op_task(tmp_path, "all_reduce", 64 * MiB), 8)
    assert (r.comm[0].best.algorithm, r.comm[0].best.mechanism) == ("nvls", "nvls_multimem")
    assert r.t_comm_s < r.t_comm_no_switch_reduction_s


@pytest.mark.parametrize(
    ("kind", "extra", "port_bytes", "eta"),
    [
        ("all_gather", {}, lambda m, w: (w - 1) * m, "ce"),
        ("reduce_scatter", {}, lambda m, w: (w - 1) / w * m, "nccl"),
        ("all_to_all", {}, lambda m, w: (w - 1) / w * m, "ce"),
        ("broadcast", {"root": 0}, lambda m, w: m, "ce"),
        ("reduce", {"root": 0}, lambda m, w: m, "nccl"),
        ("scatter", {"root": 0}, lambda m, w: (w - 1) * m, "ce"),
        ("gather", {"root": 0}, lambda m, w: (w - 1) * m, "ce"),
        ("send_recv", {"pattern": "ring"}, lambda m, w: m, "ce"),
    ],
)
@pytest.mark.parametrize("w", [2, 8])
def test_collective_bounds(tmp_path: Path, kind: str, extra: dict, port_bytes, eta: str,
                           w: int) -> None:
    m = 2 * MiB
    r = bound(one_op_task(tmp_path, kind, m, extra), w)
    assert r.t_comm_line_rate_s == pytest.approx(port_bytes(m, w) / LINE)
    assert r.t_comm_s == pytest.approx(port_bytes(m, w) / (ETA[eta] * LINE))


def test_latency_floor_counts_syncs_on_the_critical_path(tmp_path: Path) -> None:
    # two dependent all-gathers: 1 launch + 2 one-step syncs; an independent third adds none
    more = [{"id": "b", "kind": "all_gather", "bytes_per_rank": 64},
            {"id": "c", "kind": "all_gather", "bytes_per_rank": 64, "after": []}]
    r = bound(one_op_task(tmp_path, "all_gather", 64, more_ops=more))
    assert r.sync_steps_critical_path == 2
    assert r.t_latency_floor_s == pytest.approx(LAUNCH + 2 * SYNC)
    assert r.binding == "latency"


def test_repeat_scales_bytes_and_chain_scales_syncs(tmp_path: Path) -> None:
    r1 = bound(one_op_task(tmp_path, "all_to_all", MiB))
    r4 = bound(one_op_task(tmp_path, "all_to_all", MiB, {"repeat": 4}))
    r4c = bound(one_op_task(tmp_path, "all_to_all", MiB, {"repeat": 4, "chain": True}))
    assert r4.t_comm_s == pytest.approx(4 * r1.t_comm_s)
    assert r4.sync_steps_critical_path == 1 and r4c.sync_steps_critical_path == 4


def test_imbalance_scales_the_busiest_port(tmp_path: Path) -> None:
    r = bound(one_op_task(tmp_path, "all_to_all", MiB, {"data_dependent": True,
                                                         "imbalance": 1.5}))
    assert r.t_comm_s == pytest.approx(1.5 * 7 / 8 * MiB / (ETA["ce"] * LINE))


def test_compute_and_memory_terms(tmp_path: Path) -> None:
    gemm = {"id": "gemm", "kind": "compute", "compute": "gemm", "dtype": "bf16",
            "flops": "2 * 8192 * 8192 * 8192", "hbm_bytes": "3 * 8192 * 8192 * 2"}
    r = bound(one_op_task(tmp_path, "all_reduce", 2 * MiB, more_ops=[gemm]))
    assert r.t_comp_s == pytest.approx(2 * 8192**3 / 989.4e12)
    assert r.t_mem_s == pytest.approx(3 * 8192**2 * 2 / 3350e9)
    assert r.binding == "compute"
    assert r.t_roof_s == r.t_comp_s


def test_subgroups_load_their_own_ports(tmp_path: Path) -> None:
    # W = 8 as four concurrent 2-rank groups: each port carries the 2-rank all-reduce's bytes
    m = 4 * MiB
    path = one_op_task(tmp_path, "all_reduce", m, {"group": "tp"},
                       groups={"tp": {"size": 2, "layout": "strided"}})
    r = bound(path, 8)
    assert r.t_comm_line_rate_s == pytest.approx(m / LINE)  # 2(n-1)/n = 1 at n = 2


def test_two_nodes_all_to_all_is_nic_bound(tmp_path: Path) -> None:
    m = 16 * MiB
    r = bound(one_op_task(tmp_path, "all_to_all", m), 16, "h100-ib-2node")
    # each GPU sends 8 of its 16 slices to the other node through its own 50 GB/s NIC
    assert r.t_comm_line_rate_s == pytest.approx(m / 2 / 50e9)
    assert r.t_comm_s == pytest.approx(m / 2 / (0.94 * 50e9))
    assert r.busiest_link is not None and ".nic." in r.busiest_link


def test_two_nodes_all_reduce_uses_hierarchy(tmp_path: Path) -> None:
    m = 64 * MiB
    r = bound(one_op_task(tmp_path, "all_reduce", m), 16, "h100-ib-2node")
    c = r.comm[0]
    # NVLS in each node (the buffer plus an eighth on each NVLink port, each way) and an eighth
    # of the buffer across each GPU's NIC (NVLSTree)
    assert c.line_algorithm == "nvls_tree"
    assert r.t_comm_line_rate_s == pytest.approx(max(1.125 * m / LINE, m / 8 / 50e9))
    # without in-switch reduction: two-shot inside the node, 1/8 of the buffer across the NIC
    assert c.line_algorithm_no_switch_reduction == "hierarchical"
    assert r.t_comm_line_rate_no_switch_reduction_s == pytest.approx(
        max(1.75 * m / LINE, m / 8 / 50e9))
    assert c.nic_bytes == pytest.approx(m / 8)


def test_world_size_beyond_topology(tmp_path: Path) -> None:
    with pytest.raises(InfeasibleError, match="has 8"):
        bound(one_op_task(tmp_path, "all_reduce", MiB), 16)


def test_attainment_and_what_if(tmp_path: Path) -> None:
    task = one_op_task(tmp_path, "all_gather", 2 * MiB)
    base = analyze(task, measured_us=100.0)
    assert base.attainment == pytest.approx(base.roofline.t_roof_s / 100e-6)
    faster = analyze(task, sets={"scale_up.link_bandwidth_GBps": "50"})
    assert faster.roofline.t_comm_s == pytest.approx(base.roofline.t_comm_s / 2)


def test_worked_example_in_metrics_md() -> None:
    """docs/metrics.md section 7 quotes these numbers; keep the doc true."""
    r = analyze("1").roofline
    m = 1024 * 1024 * 2
    assert r.t_comm_line_rate_s == pytest.approx(9 / 8 * m / LINE) == pytest.approx(5.24288e-6)
    assert r.t_comm_s == pytest.approx(9 / 8 * m / (0.69 * LINE))
    assert r.t_comm_s * 1e6 == pytest.approx(7.598377, abs=1e-6)
    assert r.t_comm_no_switch_reduction_s * 1e6 == pytest.approx(9.945843, abs=1e-6)
    assert r.t_mem_s * 1e6 == pytest.approx(1.252031, abs=1e-6)
    assert r.t_latency_floor_s == pytest.approx(LAUNCH + SYNC)
    assert r.binding == "comm"
    assert r.comm[0].busbw_at_bound_Bps == pytest.approx(483e9, rel=1e-3)


def test_root_only_and_non_root_compute(tmp_path: Path) -> None:
    """t_mem and t_comp are the busiest rank's: root-only work counts only on the root."""
    ops = [
        {"id": "everyone", "kind": "compute", "compute": "copy", "flops": 0, "hbm_bytes": 1e6},
        {"id": "root_only", "kind": "compute", "compute": "copy", "flops": 0,
         "hbm_bytes": 8e6, "ranks": "root", "root": 3},
        {"id": "others", "kind": "compute", "compute": "copy", "flops": 0, "hbm_bytes": 2e6,
         "ranks": "non_root", "root": 3},
    ]
    r = bound(one_op_task(tmp_path, "gather", MiB, {"root": 3}, more_ops=ops))
    assert r.t_mem_s == pytest.approx(9e6 / 3350e9)  # the root: 1 + 8 MB; others 1 + 2 MB


def test_rotating_root_spreads_the_root_over_the_group(tmp_path: Path) -> None:
    """A loop over owners (each rank scatters once) loads every port once, not one W times."""
    m = 1 * MiB
    fixed = bound(one_op_task(tmp_path, "scatter", m, {"repeat": "W"}))
    rotating = bound(one_op_task(tmp_path, "scatter", m, {"repeat": "W",
                                                          "rotate_root": True}))
    # scatter is direct from the root: the root's egress carries (n-1) m per call
    assert fixed.comm[0].egress_bytes == pytest.approx(8 * 7 * m)
    assert rotating.comm[0].egress_bytes == pytest.approx(7 * m)
    assert rotating.t_comm_s == pytest.approx(7 * m / (ETA["ce"] * LINE))


def test_compute_imbalance_scales_the_busiest_rank(tmp_path: Path) -> None:
    extra = {"id": "work", "kind": "compute", "compute": "gemm", "flops": 1e12,
             "hbm_bytes": 1e9}
    plain = bound(one_op_task(tmp_path, "all_reduce", 1024, more_ops=[extra]))
    skewed = bound(one_op_task(tmp_path, "all_reduce", 1024,
                               more_ops=[{**extra, "imbalance": 1.5}]))
    assert skewed.t_comp_s == pytest.approx(1.5 * plain.t_comp_s)
    assert skewed.t_mem_s == pytest.approx(1.5 * plain.t_mem_s)


def test_an_op_repeated_zero_times_costs_nothing(tmp_path: Path) -> None:
    r = bound(one_op_task(tmp_path, "all_reduce", 1 * MiB, {"repeat": 0}))
    assert r.t_comm_s == 0 and r.sync_steps_critical_path == 0
    assert r.t_latency_floor_s == 0  # nothing left to do: not even a launch


def test_a_call_in_a_group_of_one_rank_needs_no_launch(tmp_path: Path) -> None:
    r = bound(one_op_task(tmp_path, "all_gather", 1 * MiB), 1)
    assert r.t_roof_s == 0
    r = bound(one_op_task(tmp_path, "all_gather", 1 * MiB), 2)
    assert r.t_latency_floor_s > LAUNCH
