"""How NCCL carries a collective: its algorithms, protocols, tuner, latencies and pipelining.

NCCL picks, per call, the (algorithm, protocol) its own alpha-beta model says is fastest
(``ncclTopoGetAlgoTime`` in src/graph/tuning.cc: time = baseLat + steps x hwLat +
bytes / bandwidth). This module does the same with the topology's numbers: each protocol is a
mechanism of the topology file (``nccl_ll``, ``nccl_ll128``, ``nccl_simple``: efficiency, base
latency ``latency_us`` and per-hop latency ``step_latency_us`` for rings over the scale-up
fabric); the tree and NVLS latencies and the network hop latencies below are NCCL's tuner
constants (NCCL's src/graph/tuning.cc: docs/sources.md [S21] and D4.3).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pkbsim.collectives import ALGORITHMS
from pkbsim.collectives.base import Context
from pkbsim.placement import call_bandwidth_s
from pkbsim.task.schema import CommOp
from pkbsim.topology.fabric import Fabric
from pkbsim.topology.schema import Topology
from pkbsim.units import US

PROTOCOLS = {"LL": "nccl_ll", "LL128": "nccl_ll128", "Simple": "nccl_simple"}

# NCCL tuning.cc: tree base latency per protocol, tree / NVLS per-hop latency on NVLink, and the
# per-hop latency of a step that crosses the network (ring, tree), in microseconds.
TREE_BASE_US = {"LL": 6.8, "LL128": 14.0, "Simple": 8.4}
TREE_NVLINK_HOP_US = {"LL": 0.6, "LL128": 1.25, "Simple": 4.0}
NVLS_HOP_US = 25.0  # NVLS (Simple only), one hop per call
NET_HOP_US = {"ring": {"LL": 2.7, "LL128": 4.0, "Simple": 14.0},
              "tree": {"LL": 5.0, "LL128": 8.5, "Simple": 14.0}}
P2P_LL_THRESHOLD_BYTES = 16384  # NCCL_P2P_LL_THRESHOLD: point-to-point below this uses LL
PIPELINE_CHUNK_BYTES = 512 * 1024  # Simple's step: its 4 MiB buffer over NCCL_STEPS = 8


@dataclass(frozen=True)
class NcclChoice:
    algorithm: str
    protocol: str
    mechanism: str
    chunks: int
    start_latency_s: float  # base latency (launch handshake) of the call
    step_latency_s: float  # per hop inside the node
    net_latency_s: float  # per hop across the network
    estimate_s: float  # NCCL's own alpha-beta estimate for the call


def candidates(kind: str, ctx: Context, topo: Topology) -> list[tuple[str, str]]:
    """(algorithm, protocol) pairs NCCL may use for this call."""
    one_node = ctx.nodes == 1
    nvls = topo.scale_up.in_switch_reduction and one_node and ctx.n > 1
    protos = [p for p in PROTOCOLS if PROTOCOLS[p] in topo.mechanisms]
    algs: list[str]
    if kind == "all_reduce":
        algs = ["ring", "tree"] + (["nvls"] if nvls else []) + ([] if one_node else
                                                                 ["hierarchical"])
    elif kind in ("reduce_scatter", "all_gather"):
        algs = ["ring"] + (["nvls" if kind == "reduce_scatter" else "multicast"] if nvls else [])
        algs += [] if one_node else ["hierarchical"]
    elif kind in ("broadcast", "reduce"):
        algs = ["ring"]
    else:  # all_to_all, scatter, gather, send_recv: NCCL's point-to-point sends
        algs = ["direct"]
    out = []
    for alg in algs:
        if not ALGORITHMS[alg].applies(kind, ctx):
            continue
        if alg in ("nvls", "multicast") and "nvls_multimem" not in topo.mechanisms:
            continue
        for proto in protos:
            if alg in ("nvls", "multicast", "hierarchical") and proto != "Simple":
                continue
            out.append((alg, proto))
    return out


def choose(op: CommOp, nbytes: float, ctx: Context, world_size: int, fabric: Fabric,
           algorithm: str | None = None, protocol: str | None = None) -> NcclChoice:
    """NCCL's pick for one call of ``op`` with ``nbytes`` per rank (or the forced pair)."""
    topo = fabric.topo
    pairs = candidates(op.kind, ctx, topo)
    if algorithm:
        pairs = [p for p in pairs if p[0] == algorithm] or [(algorithm, "Simple")]
    if protocol:
        pairs = [p for p in pairs if p[1] == protocol] or [(pairs[0][0], protocol)]
    if op.kind in ("all_to_all", "scatter", "gather", "send_recv") and not (
            algorithm or protocol):
        per_peer = nbytes / max(ctx.n, 1) if op.kind == "all_to_all" else nbytes
        proto = "LL" if per_peer <= P2P_LL_THRESHOLD_BYTES else "Simple"
        pairs = [p for p in pairs if p[1] == proto] or pairs
    sized = replace(op, bytes_per_rank=nbytes, imbalance=1.0)
    best: NcclChoice | None = None
    for alg_name, proto in pairs:
        choice = _cost(alg_name, proto, sized, ctx, world_size, fabric)
        if best is None or choice.estimate_s < best.estimate_s:
            best = choice
    assert best is not None
    return best


def _cost(alg_name: str, proto: str, op: CommOp, ctx: Context, world_size: int,
          fabric: Fabric) -> NcclChoice:
    topo = fabric.topo
    alg = ALGORITHMS[alg_name]
    # NCCL's NVLS kernels (all-reduce, reduce-scatter, all-gather) move data with multimem
    mech_name = "nvls_multimem" if alg_name in ("nvls", "multicast") else PROTOCOLS[proto]
    mech = topo.mechanisms[mech_name]
    simple = topo.mechanisms[PROTOCOLS[proto]]
    steps = alg.steps(op.kind, ctx)
    if alg_name == "tree":
        base, hop = TREE_BASE_US[proto], TREE_NVLINK_HOP_US[proto]
    elif alg_name in ("nvls", "multicast"):
        base, hop, steps = NVLS_HOP_US, mech.step_latency_us, 1
    else:
        base, hop = simple.latency_us, simple.step_latency_us
    net = NET_HOP_US["tree" if alg_name == "tree" else "ring"][proto]
    hops_net = 0 if ctx.nodes == 1 else (2 * (ctx.nodes - 1) if op.kind == "all_reduce"
                                         else ctx.nodes - 1)
    t_bw = call_bandwidth_s(alg, mech, op, world_size, fabric)
    estimate = (base + max(steps - hops_net, 0) * hop + hops_net * net) * US + t_bw
    chunks = alg.pipeline_chunks(op.kind, op.bytes_per_rank, ctx.n, PIPELINE_CHUNK_BYTES)
    return NcclChoice(alg_name, proto, mech.name, chunks, base * US,
                      hop * US, net * US, estimate)
