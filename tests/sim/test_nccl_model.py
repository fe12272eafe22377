"""NCCL's model (issue 18): rails across nodes, PXN, NVLSTree, channels by size, the LL ceiling,
NCCL's latency formulas and the two host models, each against a closed form."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from paths import ROOT

from pkbsim.collectives import ALGORITHMS, algbw_busbw
from pkbsim.collectives.base import Context
from pkbsim.placement import fabric_for, group_context, link_loads
from pkbsim.planning.evaluate import collective_spec
from pkbsim.sim import SimOptions, Strategy, nccl, simulate
from pkbsim.task.loader import instantiate
from pkbsim.task.schema import CommOp, TaskInstance
from pkbsim.topology.loader import load_topology

MIB, GIB = 2**20, 2**30


def call(kind: str, nbytes: float, world: int) -> TaskInstance:
    return instantiate(collective_spec(kind), world, "pkb", {"size": nbytes})


def predicted(topo_name: str, kind: str, nbytes: float, world: int, host: str = "nccl-tests",
              **sets: object) -> float:
    topo = load_topology(topo_name, sets)
    return simulate(call(kind, nbytes, world), topo, Strategy("nccl_reference", host_model=host),
                    SimOptions(iterations=3)).predicted_us


def test_ring_across_nodes_uses_every_nic() -> None:
    """One ring per rail: each GPU's NIC sends one rail's crossing, 2(n-1)/n m / g."""
    topo = load_topology("h100-ib-2node")
    inst = call("all_reduce", 64 * MIB, 16)
    op = inst.ops[0]
    assert isinstance(op, CommOp)
    loads = link_loads(ALGORITHMS["ring"], op, 16, fabric_for(topo))
    nic_out = {k: v for k, v in loads.items() if k.endswith(".nic.out")}
    assert len(nic_out) == 16
    for v in nic_out.values():
        assert v == pytest.approx(2 * 15 / 16 * 64 * MIB / 8)


def test_rings_cross_on_one_rail() -> None:
    ctx = Context(n=32, nodes=4, per_node=8)
    for rail in range(8):
        order = ALGORITHMS["ring"].ring_order(ctx, rail)  # type: ignore[attr-defined]
        assert sorted(order) == list(range(32))
        crossings = [(a, b) for a, b in zip(order, order[1:] + order[:1], strict=True)
                     if a // 8 != b // 8]
        assert len(crossings) == 4
        assert all(a % 8 == b % 8 for a, b in crossings)  # k even: every crossing on one rail


def test_pxn_route_and_oversubscribed_uplink() -> None:
    fab = fabric_for(load_topology("h100-ib-2node"))
    assert fab.route(0, 11) == ("gpu0.nvlink.out", "gpu3.nvlink.in", "gpu3.nic.out",
                                "gpu11.nic.in")
    assert fab.route(3, 11) == ("gpu3.nic.out", "gpu11.nic.in")
    flat = fabric_for(load_topology("h100-ib-2node", {"scale_out.rail_optimized": False,
                                                      "scale_out.oversubscription": 2}))
    assert flat.route(0, 11) == ("gpu0.nic.out", "node0.uplink.out", "node1.uplink.in",
                                 "gpu11.nic.in")
    assert flat.link("node0.uplink.out").line_Bps == pytest.approx(8 * 50e9 / 2)


def test_nvls_tree_two_nodes_reaches_the_published_busbw() -> None:
    """2 x 8 H100 on 8 x 400G: NCCL's NVLSTree all-reduce at 1 GiB and over measures 470-490
    GB/s busbw (docs/sources.md [S33]); NVLS in each node binds: (n+1)/n of the buffer per port
    at nvls_multimem's efficiency."""
    t = predicted("h100-ib-2node", "all_reduce", GIB, 16)
    busbw = algbw_busbw("all_reduce", GIB, 16, t * 1e-6)[1] / 1e9
    assert 470 <= busbw <= 500
    topo = load_topology("h100-ib-2node")
    inst = call("all_reduce", GIB, 16)
    op = inst.ops[0]
    assert isinstance(op, CommOp)
    ctx = group_context(op, list(range(16)), topo)
    assert nccl.choose(op, GIB, ctx, 16, fabric_for(topo)).algorithm == "nvls_tree"


@pytest.mark.parametrize(("proto", "nbytes", "expected"), [
    ("Simple", 8, 1), ("Simple", 512 * 1024, 16), ("Simple", 96 * 1024, 3),
    ("LL128", 20 * 1024, 4), ("LL", 64 * 1024, 2)])
def test_channels_by_size(proto: str, nbytes: int, expected: int) -> None:
    """clamp(S / (threads x threshold), 1, 16): Simple 512 x 64 B, LL128 640 x 8 B, ring LL
    512 x 8 B x n."""
    ctx = Context(n=8)
    assert nccl.channels("ring", proto, "all_reduce", nbytes, ctx, 16) == expected
    assert nccl.channels("nvls", "Simple", "all_reduce", nbytes, ctx, 16) == 16


def test_tiny_all_reduce_is_nccl_s_ring_ll_latency() -> None:
    """8 B on 8 H100, nccl-tests: the kernel's launch, LL's base 6.6 us and 14 hops of 0.6 us;
    the host's 4.8 us per call hides behind it. torch: its 24 us per call binds."""
    lat = load_topology("dgx-h100").latency
    gpu = lat.eager_kernel_us + 6.6 + 14 * 0.6
    assert predicted("dgx-h100", "all_reduce", 8, 8) == pytest.approx(gpu, abs=0.05)
    assert predicted("dgx-h100", "all_reduce", 8, 8, host="torch") == pytest.approx(
        lat.host_collective_us, abs=0.01)


def test_tree_latency_is_a_chain_in_the_node() -> None:
    """NCCL's tree inside a node is a chain: 2 (g - 1) hops, 2 (g - 1 + log2 k) across k."""
    one = Context(n=8)
    two = Context(n=16, nodes=2, per_node=8)
    tree = ALGORITHMS["nccl_tree"]
    assert tree.steps("all_reduce", one) == 14
    assert tree.steps("all_reduce", two) == 16
    topo = load_topology("dgx-h100")
    assert nccl.latencies_us("nccl_tree", "LL", "all_reduce", one, topo,
                              real=False) == (6.8, 0.6, 5.0)


def test_ll_ceiling_caps_the_ring_ll_estimate() -> None:
    """Across two nodes NCCL's LL busbw ceiling is 39 GB/s: a 512 KiB LL ring all-gather's
    bandwidth term is at least S (n-1)/n / 39 GB/s."""
    topo = load_topology("h100-ib-2node")
    inst = call("all_gather", 32 * 1024, 16)
    op = inst.ops[0]
    assert isinstance(op, CommOp)
    ctx = group_context(op, list(range(16)), topo)
    choice = nccl.choose(op, 32 * 1024, ctx, 16, fabric_for(topo), "ring", "LL")
    floor = 16 * 32 * 1024 * 15 / 16 / 39e9
    base, hop, net = nccl.latencies_us("ring", "LL", "all_gather", ctx, topo, real=False)
    assert choice.estimate_s >= floor + (base + 14 * hop + net) * 1e-6 - 1e-12
    assert choice.flow_cap_Bps == pytest.approx(39e9 / 8)


def test_sweep_of_a_collective_names_its_host_model(tmp_path) -> None:
    out = tmp_path / "s.json"
    done = subprocess.run([sys.executable, "-m", "pkbsim", "sweep", "--collective",
                           "all_reduce", "--sizes", "8", "--metric", "nccl_reference",
                           "--out", str(out)], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text())["target"]["host_model"] == "nccl-tests"
    done = subprocess.run([sys.executable, "-m", "pkbsim", "sweep", "--collective",
                           "all_reduce", "--sizes", "8", "--host-model", "python"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "--host-model python" in done.stderr
    table = subprocess.run([sys.executable, "-m", "pkbsim", "sweep", "--collective",
                            "all_reduce", "--sizes", "8", "--host-model", "torch", "--metric",
                            "nccl_reference"], cwd=ROOT, capture_output=True, text=True,
                           timeout=120, check=False)
    host_us = load_topology("dgx-h100").latency.host_collective_us  # the torch host's cost
    assert "host model torch" in table.stdout and f"{host_us:.2f}" in table.stdout
