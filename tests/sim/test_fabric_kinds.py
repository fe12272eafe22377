"""Fabric kinds (topologies/fabrics), what NCCL pays over them, CollNet (SHARP), and the fit of
their constants on the fit half of the published nccl-tests tables (issue 31)."""

from __future__ import annotations

import math
import os
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from paths import ROOT

from pkbsim.errors import TopologyError
from pkbsim.invariants import check_monotone, collective_curves
from pkbsim.planning.evaluate import collective_spec
from pkbsim.roofline import roofline
from pkbsim.sim import Strategy, simulate
from pkbsim.task.loader import instantiate
from pkbsim.topology.fabric_kinds import SCALE_OUT_KINDS, SCALE_UP_KINDS, fabric_kinds
from pkbsim.topology.loader import list_topologies, load_topology
from pkbsim.validation.nccl_fit import current_constants, fit, parameters_of
from pkbsim.validation.published import load_tables, predict_row

DATA = ROOT / "tests" / "data" / "nccl_tests"
NCCL_TESTS = Strategy("nccl_reference", host_model="nccl-tests")


def _nccl(topo_name: str, kind: str, w: int, size: float, sets: dict[str, object]
          ) -> tuple[float, str]:
    topo = load_topology(topo_name, sets)
    result = simulate(instantiate(collective_spec(kind), w, "pkb", {"size": size}), topo,
                      NCCL_TESTS)
    choice = result.ops[0].choice
    assert choice is not None
    return result.predicted_us, f"{choice.algorithm}/{choice.protocol}"


def test_every_kind_loads_and_every_topology_takes_its_kinds_values() -> None:
    kinds = fabric_kinds()
    assert set(kinds) == {*SCALE_UP_KINDS, *SCALE_OUT_KINDS}
    for kind in kinds.values():
        assert kind.source and kind.description
    for name in list_topologies():
        topo = load_topology(name)
        assert topo.scale_up.step_latency_us == kinds[topo.scale_up.fabric].protocol_steps_us()
        if topo.scale_out is not None:
            assert topo.scale_out.step_latency_us == kinds[topo.scale_out.fabric].step_latency_us


def test_a_file_may_set_its_own_fabric_and_cost() -> None:
    topo = load_topology("h100-ib-2node", {"scale_out.fabric": "efa"})
    assert topo.scale_out is not None
    assert topo.scale_out.step_latency_us == fabric_kinds()["efa"].step_latency_us
    own = load_topology("h100-ib-2node", {"scale_out.fabric": "efa",
                                          "scale_out.step_latency_us": 7.5})
    assert own.scale_out is not None and own.scale_out.step_latency_us == 7.5


def test_an_unknown_fabric_is_one_line_naming_the_field() -> None:
    with pytest.raises(TopologyError) as err:
        load_topology("h100-ib-2node", {"scale_out.fabric": "carrier-pigeon"})
    line = err.value.one_line()
    assert "scale_out.fabric" in line and "h100-ib-2node" in line and "\n" not in line


@pytest.mark.parametrize("proto_size", [8, 2**26])
def test_nccl_picks_by_its_tuner_and_pays_the_fabric_s_real_step(proto_size: int) -> None:
    """The extra step cost changes the time, never NCCL's choice; across the network a Simple
    step pays it twice (NCCL adds its net latency twice for Simple's flush)."""
    zero = {"scale_up.step_latency_us": {"LL": 0, "LL128": 0, "Simple": 0},
            "scale_out.step_latency_us": 0.0}
    more = {**zero, "scale_out.step_latency_us": 10.0}
    t0, how0 = _nccl("h100-ib-2node", "all_reduce", 16, proto_size, zero)
    t1, how1 = _nccl("h100-ib-2node", "all_reduce", 16, proto_size, more)
    assert how0 == how1
    assert t1 > t0
    inside = {**zero, "scale_up.step_latency_us": {"LL": 1.0, "LL128": 1.0, "Simple": 1.0}}
    t2, how2 = _nccl("dgx-h100", "all_gather", 8, proto_size, inside)
    t3, how3 = _nccl("dgx-h100", "all_gather", 8, proto_size, zero)
    assert how2 == how3 and t2 > t3


def test_a_small_call_pays_each_network_hop_once_per_step() -> None:
    """8 B all-reduce over 2 x 8 ranks: NCCL's choice crosses the network a fixed number of
    times on its critical path; x us more per step adds a whole multiple of x (LL: once each)."""
    zero = {"scale_up.step_latency_us": {"LL": 0, "LL128": 0, "Simple": 0},
            "scale_out.step_latency_us": 0.0}
    t0, how = _nccl("h100-ib-2node", "all_reduce", 16, 8, zero)
    t1, _ = _nccl("h100-ib-2node", "all_reduce", 16, 8, {**zero,
                                                          "scale_out.step_latency_us": 5.0})
    hops = (t1 - t0) / 5.0
    assert how.endswith("/LL")
    assert hops >= 1 and math.isclose(hops, round(hops), abs_tol=1e-6)


def test_collnet_runs_only_where_the_network_reduces_and_never_beats_the_roofline() -> None:
    sharp = {"node.count": 4, "scale_out.in_network_reduction": True}
    size = 2**30
    inst = instantiate(collective_spec("all_reduce"), 32, "pkb", {"size": size})
    plain = load_topology("h100-ib-2node", {"node.count": 4})
    with_sharp = load_topology("h100-ib-2node", sharp)
    r_plain = simulate(inst, plain, NCCL_TESTS)
    r_sharp = simulate(inst, with_sharp, NCCL_TESTS)
    plain_choice, sharp_choice = r_plain.ops[0].choice, r_sharp.ops[0].choice
    assert plain_choice is not None and sharp_choice is not None
    assert plain_choice.algorithm != "collnet"
    assert sharp_choice.algorithm == "collnet"
    # each NIC carries one slice each way instead of the tree's two: faster, and still bounded
    assert r_sharp.predicted_us < r_plain.predicted_us
    assert r_sharp.predicted_us >= roofline(inst, with_sharp).t_roof_s * 1e6
    assert roofline(inst, with_sharp).t_roof_s < roofline(inst, plain).t_roof_s


def test_the_sharp_source_is_predicted_with_collnet() -> None:
    tables = {Path(t.file).name: t for t in load_tables(DATA)}
    table = tables["h100x96-coreweave-sharp.yaml"]
    size, measured = table.rows[-1]
    row = predict_row(table, size, measured)
    assert row.error is None and row.predicted_us is not None


def test_the_halves_follow_the_documented_rule() -> None:
    """Within each (scope, fabric kind) group, sources sorted by file name alternate fit,
    report, fit, ... (docs/measurements/nccl_tests_published.md)."""
    groups: dict[tuple[str, str], dict[str, str]] = {}
    for t in load_tables(DATA):
        groups.setdefault((t.scope, t.fabric), {})[Path(t.file).name] = t.half
    assert len(groups) >= 5
    for names in groups.values():
        expect = ["fit" if i % 2 == 0 else "report" for i in range(len(names))]
        assert [names[n] for n in sorted(names)] == expect
    halves = {t.half for t in load_tables(DATA) if t.scope == "multi-node"}
    assert halves == {"fit", "report"}


def test_the_fit_moves_only_the_constants_its_rows_use_and_lowers_their_error() -> None:
    tables = {Path(t.file).name: t for t in load_tables(DATA)}
    efa = tables["h100x16-aws-p5-efa.yaml"]
    small = replace(efa, rows=efa.rows[:3], half="fit")
    assert parameters_of(small)[-1] == "efa"
    start = {**current_constants(), "efa": 0.0}
    result = fit([small], jobs=1, rounds=1, start=start)
    assert "efa" in result.fitted and set(result.fitted) <= set(parameters_of(small))
    assert len(result.fitted) == 2  # the network's kind and the one protocol NCCL ran
    assert result.rounds[-1] < result.rounds[0]
    assert result.constants["efa"] > 0
    for name in ("roce", "infiniband", "tcpxo"):
        assert result.constants[name] == start[name]


FUZZ = settings(deadline=None, derandomize=not os.environ.get("PKBSIM_FUZZ_RANDOM"),
                suppress_health_check=[HealthCheck.too_slow],
                max_examples=int(os.environ.get("PKBSIM_FUZZ_EXAMPLES", "12")))


@FUZZ
@given(topo_name=st.sampled_from(("dgx-h100", "dgx-a100", "hgx-b200", "h100-ib-2node",
                                  "pcie-l40s-8")),
       kind=st.sampled_from(("all_reduce", "all_gather", "reduce_scatter", "all_to_all",
                             "broadcast")),
       world=st.sampled_from((2, 4, 8, 16)), low=st.integers(0, 26), span=st.integers(1, 4),
       up=st.floats(0, 10), net=st.floats(0, 60))
def test_no_bare_collective_falls_with_size(topo_name: str, kind: str, world: int, low: int,
                                            span: int, up: float, net: float) -> None:
    """Whatever the fabric kinds' step costs: each (algorithm, mechanism) alone, and NCCL's
    choice between sizes where it keeps its configuration, takes no less time at a larger
    size."""
    sets: dict[str, object] = {"scale_up.step_latency_us": {"LL": up, "LL128": up,
                                                            "Simple": up}}
    if "ib" in topo_name:
        sets["scale_out.step_latency_us"] = net
    topo = load_topology(topo_name, sets)
    w = min(world, topo.total_gpus)
    sizes = [float(2 ** e) for e in range(low, low + span + 1)]
    for curve in collective_curves(topo, (kind,), sizes, [w]):
        assert check_monotone(curve.where, curve.sizes, curve.times_us, curve.configs) == []


def test_an_excluded_source_is_in_neither_half() -> None:
    tables = load_tables(DATA)
    excluded = [t for t in tables if t.excluded]
    assert excluded and all(len(t.excluded) > 20 for t in excluded)
    efa = next(t for t in tables if Path(t.file).name == "h100x16-aws-p5-efa.yaml")
    kept = replace(efa, rows=efa.rows[:2], half="fit")
    dropped = replace(efa, rows=efa.rows[2:4], half="fit", excluded="a broken run")
    result = fit([kept, dropped], jobs=1, rounds=1)
    assert [r.size_bytes for r in result.rows] == [s for s, _m in kept.rows]
