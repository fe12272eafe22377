"""The shipped task files against PKB's reference files @3cc0f9b, and their bounds by hand."""

from __future__ import annotations

import pytest
from catalogue import GOLDEN, INFEASIBLE, MiB

from pkbsim.errors import InfeasibleError
from pkbsim.roofline import roofline
from pkbsim.task.loader import instantiate, list_tasks, load_task
from pkbsim.task.schema import CommOp
from pkbsim.topology import list_topologies, load_topology

LINE = 450e9

REQUIRED = set(GOLDEN)


def _comm(task_id: int, w: int = 8, preset: str = "pkb") -> list[CommOp]:
    inst = instantiate(load_task(str(task_id)), w, preset)
    return [op for op in inst.ops if isinstance(op, CommOp)]


def test_every_required_problem_ships() -> None:
    ids = {load_task(str(p)).id for p in list_tasks()}
    assert ids >= REQUIRED


@pytest.mark.parametrize("task_id", sorted(GOLDEN))
def test_bytes_per_rank_match_the_catalogue(task_id: int) -> None:
    got = [(op.kind, op.bytes_per_rank) for op in _comm(task_id)]
    assert got == GOLDEN[task_id]


def test_importance_sampling_reduce_ops_and_dtypes() -> None:
    ops = _comm(25)
    assert [op.reduce_op for op in ops] == ["sum", "sum", "sum", "min", "max", "sum", "sum"]
    assert [op.dtype for op in ops] == ["fp32"] + ["bf16"] * 6


@pytest.mark.slow
def test_all_tasks_analyze_everywhere() -> None:
    """Every task, every preset, every topology, at W = 8, 4 and 2 where the task allows it."""
    topologies = [load_topology(n) for n in list_topologies()]
    for path in list_tasks():
        spec = load_task(str(path))
        for preset in spec.presets:
            for w in (8, 4, 2):
                try:
                    inst = instantiate(spec, w, preset)
                except InfeasibleError as exc:
                    assert "constraint" in exc.message or "group" in exc.message
                    continue
                for topo in topologies:
                    r = roofline(inst, topo)
                    assert r.t_roof_s > 0
                    assert r.t_comm_line_rate_s <= r.t_comm_s + 1e-15
                    assert r.t_comm_s <= r.t_comm_no_switch_reduction_s + 1e-15


# Problems 1-8 on dgx-h100 at W = 8, by hand: busiest-port bytes / (eta x 450 GB/s).
# eta: copy engine 0.87, nccl_simple 0.82 (reductions: the copy engine cannot reduce),
# nvls_multimem 0.69 on (n+1)/n of the buffer.
HAND = {
    1: 9 / 8 * 2 * MiB / (0.69 * LINE),
    2: 7 * 2 * MiB / (0.87 * LINE),
    3: 2 * MiB / (0.87 * LINE),
    4: 2 * MiB / (0.82 * LINE),
    5: 7 * 2 * MiB / (0.87 * LINE),
    6: 7 * 2 * MiB / (0.87 * LINE),
    7: 7 / 8 * 16 * MiB / (0.82 * LINE),
    8: 7 / 8 * 16 * MiB / (0.87 * LINE),
}
HAND_LINE = {1: 9 / 8 * 2 * MiB, 2: 7 * 2 * MiB, 3: 2 * MiB, 4: 2 * MiB, 5: 7 * 2 * MiB,
             6: 7 * 2 * MiB, 7: 7 / 8 * 16 * MiB, 8: 7 / 8 * 16 * MiB}


@pytest.mark.parametrize("task_id", sorted(HAND))
def test_collective_problems_match_hand_calculation(task_id: int) -> None:
    r = roofline(instantiate(load_task(str(task_id)), 8), load_topology("dgx-h100"))
    assert r.t_comm_s == pytest.approx(HAND[task_id], rel=1e-12)
    assert r.t_comm_line_rate_s == pytest.approx(HAND_LINE[task_id] / LINE, rel=1e-12)
    assert r.binding == "comm"


def test_a100_has_no_in_switch_reduction() -> None:
    r = roofline(instantiate(load_task("1"), 8), load_topology("dgx-a100"))
    assert r.t_comm_s == r.t_comm_no_switch_reduction_s
    assert r.comm[0].best.algorithm in ("two_shot", "ring")


def test_pcie_box_is_bound_by_its_tree() -> None:
    """On PCIe, all-to-all also crosses switch uplinks and the socket link."""
    topo = load_topology("pcie-l40s-8")
    p = topo.pcie
    assert (p.gpus_per_switch, p.switches_per_socket, p.sockets) == (2, 2, 2)
    r = roofline(instantiate(load_task("8"), 8), topo)
    m = 16 * MiB
    gpu_link = 7 / 8 * m / (p.gpu_link_GBps * 1e9)
    uplink = 2 * 6 * m / 8 / (p.switch_uplink_GBps * 1e9)  # 2 GPUs x 6 peers off the switch
    socket = 4 * 4 * m / 8 / (p.inter_socket_GBps * 1e9)  # 4 GPUs x 4 peers on the other socket
    assert r.t_comm_line_rate_s == pytest.approx(max(gpu_link, uplink, socket))
    assert r.busiest_link == "node0.socket0to1"


def test_names_and_aliases_are_unique_and_indexable() -> None:
    """Lookup reads aliases from the line `aliases: [...]`; it must agree with the YAML."""
    from pkbsim.task.loader import _aliases

    seen: dict[str, str] = {}
    for path in list_tasks():
        spec = load_task(str(path))
        assert list(spec.aliases) == _aliases(path), path.name
        assert path.stem == spec.key
        for name in (spec.name, str(spec.id), *spec.aliases):
            assert name not in seen, f"{name} names both {seen[name]} and {path.name}"
            seen[name] = path.name


def test_all_87_problems_ship_one_file_each() -> None:
    ids = sorted(load_task(str(p)).id for p in list_tasks())
    assert ids == list(range(1, 88))


@pytest.mark.parametrize("task_id", range(1, 88))
def test_world_sizes_the_reference_rejects(task_id: int) -> None:
    """Each W the catalogue (or the reference, where they differ) rules out fails by name."""
    spec = load_task(str(task_id))
    bad = set(INFEASIBLE.get(task_id, []))
    for w in (2, 3, 4, 6, 8, 16):
        if w in bad:
            with pytest.raises(InfeasibleError) as info:
                instantiate(spec, w)
            assert f"cannot run at world size {w}" in info.value.message
            assert "constraint" in info.value.message or "group" in info.value.message
        else:
            inst = instantiate(spec, w)
            assert inst.world_size == w


def test_every_preset_says_where_its_sizes_come_from() -> None:
    for path in list_tasks():
        spec = load_task(str(path))
        for preset in spec.presets.values():
            assert preset.source.strip(), f"{path.name}: preset {preset.name} has no source"
        assert spec.source.strip() and spec.parallelism.strip() and spec.description.strip()
        for c in spec.constraints:
            assert c.why.strip(), f"{path.name}: constraint {c.check} has no why"


def test_most_tasks_have_a_production_size() -> None:
    specs = [load_task(str(p)) for p in list_tasks()]
    marked = [s for s in specs if s.production_preset]
    assert len(marked) >= 70
    for spec in specs:
        if spec.production_preset is None:  # a toy with no production analogue says why
            assert "production" in spec.notes.lower(), spec.key


def test_data_dependent_ops_carry_an_imbalance() -> None:
    """Routing-sized ops exist in the MoE, GNN and sort problems; each says its skew."""
    seen = set()
    for path in list_tasks():
        inst = instantiate(load_task(str(path)), 8)
        for op in inst.ops:
            if isinstance(op, CommOp) and op.data_dependent:
                seen.add(inst.spec.id)
                assert op.imbalance >= 1
    assert {10, 31, 32, 49, 50, 51, 64, 67, 85} <= seen


def test_sub_groups_of_2d_layouts() -> None:
    """Problem 22's EP groups and problem 48's FSDP x TP mesh at W = 8."""
    ops = {op.id: op for op in _comm(22)}
    sizes = sorted((op.group_size, op.group_layout) for op in ops.values())
    assert sizes == [(2, "strided"), (4, "contiguous"), (8, "contiguous")]
    groups = {(op.group, op.group_size, op.group_layout) for op in _comm(48)}
    assert {g[1:] for g in groups} == {(4, "strided"), (2, "contiguous")}
