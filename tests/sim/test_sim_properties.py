"""Properties every prediction must have, whatever the machine, size, world size or iteration
count: it is positive and never beats the roofline (issue 18: a host cost near zero once gave
0.4 us for a 16 MiB all-reduce and negative times with six iterations)."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pkbsim.planning.evaluate import collective_spec
from pkbsim.roofline import roofline
from pkbsim.sim import SimOptions, Strategy, simulate
from pkbsim.task.loader import instantiate
from pkbsim.topology.loader import load_topology

SETTINGS = settings(deadline=None, derandomize=not os.environ.get("PKBSIM_FUZZ_RANDOM"),
                    suppress_health_check=[HealthCheck.too_slow],
                    max_examples=int(os.environ.get("PKBSIM_FUZZ_EXAMPLES", "60")))
KINDS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast")
TOPOLOGIES = ("dgx-h100", "dgx-a100", "hgx-b200", "pcie-l40s-8", "h100-ib-2node",
              "h100-ib-4node")

fields = st.fixed_dictionaries({}, optional={
    # a host call costs something: at one rank an in-place NCCL call does nothing on the GPU
    # (ncclLaunchOneRank), so its host cost is all the time there is
    "latency.host_collective_us": st.floats(0.05, 60),
    "latency.nccl_launch_us": st.floats(0.05, 20),
    "latency.kernel_launch_us": st.floats(0.05, 5),  # a kernel costs something: time > 0
    "latency.eager_launch_us": st.floats(0.05, 5),
    "scale_up.link_bandwidth_GBps": st.floats(1, 200),
    "mechanisms.nccl_simple.efficiency": st.floats(0.05, 1),
    "mechanisms.nccl_simple.step_latency_us": st.floats(0, 10),
    # the roofline's floor charges a flag round trip (0.83 us) per step, NCCL's LL hop is
    # 0.6 us: with LL's base latency under ~0.25 us a bare call could beat the floor
    "mechanisms.nccl_ll.latency_us": st.floats(1, 20),
})
network = st.fixed_dictionaries({}, optional={
    "scale_out.nic_bandwidth_GBps": st.floats(1, 200),
    "scale_out.latency_us": st.floats(0, 20),
    "scale_out.oversubscription": st.floats(1, 8),
    "scale_out.rail_optimized": st.booleans(),
})


@SETTINGS
@given(topo_name=st.sampled_from(TOPOLOGIES), sets=fields, net=network,
       kind=st.sampled_from(KINDS), log_size=st.integers(0, 30), world=st.integers(1, 32),
       iterations=st.integers(1, 6), strategy=st.sampled_from(("nccl_reference", "custom_best")),
       host=st.sampled_from(("torch", "nccl-tests")))
def test_every_prediction_is_positive_and_at_least_the_roofline(
        topo_name: str, sets: dict[str, object], net: dict[str, object], kind: str,
        log_size: int, world: int, iterations: int, strategy: str, host: str) -> None:
    topo = load_topology(topo_name, {**sets, **(net if "ib" in topo_name else {})})
    w = min(world, topo.total_gpus, 16)
    inst = instantiate(collective_spec(kind), w, "pkb", {"size": 2**log_size})
    roof_us = roofline(inst, topo).t_roof_s * 1e6
    result = simulate(inst, topo, Strategy(strategy, host_model=host),
                      SimOptions(iterations=iterations))
    # one rank has nothing to move: the best kernel launches nothing (the reference still
    # calls NCCL, which returns at once)
    idle = w == 1 and strategy == "custom_best"
    assert result.predicted_us > 0 or idle
    assert result.predicted_us >= roof_us * (1 - 1e-9), (result.predicted_us, roof_us)
    assert all(t > 0 or idle for t in result.per_rank_us)


@pytest.mark.parametrize("host_us", [0.0, 0.1, 0.4, 1.0, 24.0])
@pytest.mark.parametrize("iterations", [2, 3, 6])
def test_steady_state_holds_when_the_host_costs_nothing(host_us: float, iterations: int) -> None:
    """The bug of issue 18: with a zero-time host node a later node started twice."""
    topo = load_topology("dgx-h100", {"latency.host_collective_us": host_us})
    inst = instantiate(collective_spec("all_reduce"), 8, "pkb", {"size": 16 * 2**20})
    result = simulate(inst, topo, Strategy("nccl_reference", host_model="torch"),
                      SimOptions(iterations=iterations))
    roof_us = roofline(inst, topo).t_roof_s * 1e6
    assert result.predicted_us >= roof_us
    start, end = result.window_us
    assert end - start == pytest.approx(result.predicted_us, abs=1e-5)


def test_a_kernel_launched_eagerly_cheaper_than_in_a_graph_stays_above_the_floor() -> None:
    """Found by the property above: with eager_launch_us (1) under kernel_launch_us (3) the
    floor charged the graph launch while the best kernel paid the eager one (2.66 < 3.83 us);
    the floor is now the cheaper launch."""
    topo = load_topology("dgx-h100", {"latency.kernel_launch_us": 3.0,
                                      "latency.eager_launch_us": 1.0,
                                      "latency.nccl_launch_us": 1.0})
    inst = instantiate(collective_spec("all_reduce"), 2, "pkb", {"size": 1})
    roof_us = roofline(inst, topo).t_roof_s * 1e6
    result = simulate(inst, topo, Strategy("custom_best", host_model="nccl-tests"),
                      SimOptions(iterations=2))
    assert result.predicted_us >= roof_us
