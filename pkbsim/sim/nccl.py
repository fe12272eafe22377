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

import math
from dataclasses import dataclass, replace

from pkbsim.collectives import ALGORITHMS
from pkbsim.collectives.bandwidth import BUSBW_FACTOR, size_bytes
from pkbsim.collectives.base import MAX_PIPELINE_CHUNKS, Context
from pkbsim.placement import call_bandwidth_s, network_reduces
from pkbsim.task.schema import CommOp
from pkbsim.topology.fabric import Fabric
from pkbsim.topology.schema import Topology
from pkbsim.units import US

PROTOCOLS = {"LL": "nccl_ll", "LL128": "nccl_ll128", "Simple": "nccl_simple"}

# NCCL's tuner constants (src/graph/tuning.cc, ncclTunerConstantsDefaults; NCCL master 5067397c,
# the same values since 2.19: docs/sources.md [S21]), in microseconds. Ring's base and NVLink
# per-hop latencies are the topology's nccl_* mechanisms (latency_us, step_latency_us).
TREE_BASE_US = {"LL": 6.8, "LL128": 14.0, "Simple": 8.4}
TREE_HOP_US = {"nvswitch": {"LL": 0.6, "LL128": 1.25, "Simple": 4.0},  # NVLink
               "pcie": {"LL": 1.0, "LL128": 1.9, "Simple": 4.0}}
NVLS_HOP_US = 25.0  # NVLS and NVLSTree (Simple only), once per call inside the node
NET_HOP_US = {"ring": {"LL": 2.7, "LL128": 4.0, "Simple": 14.0},
              "nccl_tree": {"LL": 5.0, "LL128": 8.5, "Simple": 14.0},
              "nvls_tree": {"LL": 0.0, "LL128": 0.0, "Simple": 20.9}}
NET_OVERHEAD_US = 1.0  # NCCL_NET_OVERHEAD default (x86); x3 for Simple: a ring step's floor
# Channel tuning (src/enqueue.cc): NCCL drops channels while bytes < channels x threads x
# threshold; NCCL_{LL,LL128,SIMPLE}_THREAD_THRESHOLD (src/include/comm.h; ring LL x ranks) and
# the threads per block (src/include/device.h).
THREAD_THRESHOLD = {"LL": 8, "LL128": 8, "Simple": 64}
THREADS = {"LL": 512, "LL128": 640, "Simple": 512}
# LL's busbw ceiling (tuning.cc llMaxBws, GB/s): inside one node by GPU generation, across
# 2 nodes / more by host CPU (x86 Intel taken: the shipped machines' hosts are not AMD)
LL_MAX_BUSBW_ONE_NODE_GBPS = {"volta": 39.0, "ampere": 87.7, "hopper": 141.0,
                              "blackwell": 282.0}
LL_MAX_BUSBW_NODES_GBPS = {2: 39.0, 3: 20.4}  # 2 nodes; 3 stands for 3 or more
# NCCL's own estimate of a tree all-reduce: bandwidth x 0.92, times a correction per power of
# two of bytes / 64 (64 B .. 256 MiB) for its mid-size pipelining (tuning.cc
# treeCorrectionFactor); a multi-node Simple ring all-reduce's latency x 1.4 (its plateau)
TREE_BW_FACTOR = 0.92
TREE_CORRECTION = {
    "LL": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0,
           1.0, 1.0, 1.0, 1.0),
    "LL128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9,
              .9, .9, 1.0, 1.0, 1.0),
    "Simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7,
               .8, .9, .9, .9)}
RING_PLATEAU = 1.4
TREE_CHUNK_MIN_BYTES = 128 * 1024  # NCCL halves a tree's chunk down to this for pipelining
P2P_LL_THRESHOLD_BYTES = 16384  # NCCL_P2P_LL_THRESHOLD: point-to-point below this uses LL
PIPELINE_CHUNK_BYTES = 512 * 1024  # Simple's step: its 4 MiB buffer over NCCL_STEPS = 8
# LL's chunk: a 64 KiB step (its 512 KiB buffer over NCCL_STEPS) of which half is flags
# (enqueue.cc calcCollChunking): LL moves on in pieces this small, trees and rings alike
LL_CHUNK_BYTES = 32 * 1024
NVLS_ALGOS = ("nvls", "multicast", "nvls_tree", "collnet")
# NVLS's pipeline (src/transport/nvls.cc, src/enqueue.cc calcCollChunking): each of its channels
# moves the rank's slice in chunks of NCCL_NVLS_CHUNKSIZE (128 KiB), halved down to 16-32 KiB
# while the call is small against channels x heads x chunk; 16 channels on Hopper, 24 on
# Blackwell in one NVLink domain, 32 across nodes
NVLS_CHUNK_BYTES = 128 * 1024
NVLS_CHANNELS = {"hopper": (16, 16), "blackwell": (24, 32)}  # (one node, across nodes)
NVLS_SHRINK = ((64, 65536), (8, 32768), (2, 16384))  # (calls under k x ops x chunk, chunk)
NVLS_TREE_SHRINK = ((32, 262144), (16, 131072), (4, 65536), (1, 32768))
# CollNet (SHARP) on NVLink: CollNetDirect's hwLat per step inside the node and across the
# network, Simple only, no base latency (tuning.cc)
COLLNET_HOP_US, COLLNET_NET_US = 3.7, 31.0
P2P_KINDS = ("all_to_all", "scatter", "gather", "send_recv")  # NCCL's grouped send/recv


def generation(topo: Topology) -> str:
    """The GPU generation NCCL's tuner tables are indexed by, read from the model name."""
    model = topo.gpu.model.upper()
    if any(k in model for k in ("B200", "B300", "GB200", "GB300", "BLACKWELL")):
        return "blackwell"
    if any(k in model for k in ("H100", "H200", "H20", "H800", "GH200")):
        return "hopper"
    if "V100" in model:
        return "volta"
    return "ampere"  # A100 and the sm_8x cards


def ll_max_busbw_Bps(ctx: Context, topo: Topology) -> float:
    if ctx.nodes == 1:
        return LL_MAX_BUSBW_ONE_NODE_GBPS[generation(topo)] * 1e9
    return LL_MAX_BUSBW_NODES_GBPS[min(ctx.nodes, 3)] * 1e9


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
    channels: int = 1  # channels (one thread block, one SM each) NCCL runs the call on
    flow_cap_Bps: float = float("inf")  # LL's busbw ceiling, per concurrent send of a rank


def candidates(kind: str, ctx: Context, topo: Topology) -> list[tuple[str, str]]:
    """(algorithm, protocol) pairs NCCL may use for this call (tuning.cc: NVLS in one node;
    NVLSTree across nodes; AG/RS across nodes by ring, as NVLS there needs CollNet)."""
    one_node = ctx.nodes == 1
    nvls = topo.scale_up.in_switch_reduction and ctx.n > 1
    protos = [p for p in PROTOCOLS if PROTOCOLS[p] in topo.mechanisms]
    algs: list[str]
    if kind == "all_reduce":
        algs = ["ring", "nccl_tree"]
        if nvls:
            algs += ["nvls"] if one_node else ["nvls_tree"]
        if nvls and not one_node and network_reduces(topo):
            algs.append("collnet")
    elif kind in ("reduce_scatter", "all_gather"):
        algs = ["ring"]
        if nvls and one_node:
            algs += ["nvls" if kind == "reduce_scatter" else "multicast"]
    elif kind in ("broadcast", "reduce"):
        algs = ["ring"]
    else:  # all_to_all, scatter, gather, send_recv: NCCL's point-to-point sends
        algs = ["direct"]
    out = []
    for alg in algs:
        if not ALGORITHMS[alg].applies(kind, ctx):
            continue
        if alg in NVLS_ALGOS and "nvls_multimem" not in topo.mechanisms:
            continue
        for proto in protos:
            if alg in NVLS_ALGOS and proto != "Simple":
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


def channels(alg_name: str, proto: str, kind: str, nbytes: float, ctx: Context,
             most: int) -> int:
    """Channels NCCL runs a call on: NVLS always its own count; grouped sends and receives
    (all-to-all, scatter, gather, send/recv) its pool of point-to-point channels, whatever the
    size (init.cc ncclTopoComputeP2pChannels); rings and trees drop channels while the call's
    bytes (nccl-tests' S) are under channels x threads x threshold."""
    if alg_name in NVLS_ALGOS or kind in P2P_KINDS or most <= 1:
        return max(most, 1)
    threshold = THREAD_THRESHOLD[proto] * (ctx.n if alg_name == "ring" and proto == "LL" else 1)
    per_channel = THREADS[proto] * threshold
    total = size_bytes(kind, nbytes, ctx.n)
    return int(min(most, max(1, total // per_channel)))


def nvls_chunk_bytes(alg_name: str, total_bytes: float, ctx: Context, topo: Topology
                     ) -> tuple[int, int]:
    """(NCCL's NVLS chunk per channel, NVLS channels) for a call of ``total_bytes``
    (nccl-tests' S): the chunk shrinks while the call is small against its concurrent
    operations (channels x heads, the GPUs of one node)."""
    one, many = NVLS_CHANNELS.get(generation(topo), (16, 16))
    nc = one if ctx.nodes == 1 else many
    heads = ctx.per_node if ctx.nodes > 1 and ctx.per_node > 0 else ctx.n
    ops = nc * heads
    chunk = NVLS_CHUNK_BYTES
    for k, floor in NVLS_TREE_SHRINK if alg_name == "nvls_tree" else NVLS_SHRINK:
        if total_bytes < k * ops * chunk and chunk > floor:
            chunk = floor
    return chunk, nc


def latencies_us(alg_name: str, proto: str, kind: str, ctx: Context, topo: Topology,
                 real: bool = True) -> tuple[float, float, float]:
    """(base, per hop inside a node, per hop across nodes) in microseconds; the simulator pays
    the base once and a hop per message on the critical path. ``real=False``: as NCCL's tuner
    has them (what it picks by); otherwise each hop also pays what a step over its fabric
    costs beyond the tuner's constant (the fabric kinds' ``step_latency_us``; across the
    network twice for Simple, as NCCL adds its net latency twice for Simple's flush)."""
    tuner = _tuner_latencies_us(alg_name, proto, kind, ctx, topo)
    return _with_fabric_steps(tuner, proto, ctx, topo) if real else tuner


def _with_fabric_steps(tuner: tuple[float, float, float], proto: str, ctx: Context,
                       topo: Topology) -> tuple[float, float, float]:
    """The tuner's (base, hop, net) with each hop's real extra cost over its fabric."""
    base, hop, net = tuner
    hop += topo.scale_up.step_latency_us.get(proto, 0.0)
    if topo.scale_out is not None and ctx.nodes > 1:
        net += topo.scale_out.step_latency_us * (2 if proto == "Simple" else 1)
    return base, hop, net


def _tuner_latencies_us(alg_name: str, proto: str, kind: str, ctx: Context, topo: Topology
                        ) -> tuple[float, float, float]:
    simple = topo.mechanisms.get(PROTOCOLS[proto])
    multi = ctx.nodes > 1
    ppn_one = multi and ctx.per_node == 1
    # with one rank per node every step crosses the network: NCCL charges the tree's net hop
    net = NET_HOP_US["nccl_tree" if ppn_one and alg_name == "ring" else alg_name][proto] \
        if alg_name in NET_HOP_US else NET_HOP_US["ring"][proto]
    if alg_name == "nccl_tree":
        fabric = "nvswitch" if topo.scale_up.fabric == "nvswitch" else "pcie"
        return TREE_BASE_US[proto], TREE_HOP_US[fabric][proto], net
    if alg_name == "collnet":
        return 0.0, COLLNET_HOP_US, COLLNET_NET_US
    if alg_name in NVLS_ALGOS:
        hop = topo.mechanisms["nvls_multimem"].step_latency_us
        return NVLS_HOP_US, hop, net
    assert simple is not None
    hop = simple.step_latency_us
    if multi:  # a ring step across nodes cannot be quicker than the proxy's post
        hop = max(hop, NET_OVERHEAD_US * (3 if proto == "Simple" else 1))
    return simple.latency_us, hop, net


def _cost(alg_name: str, proto: str, op: CommOp, ctx: Context, world_size: int,
          fabric: Fabric) -> NcclChoice:
    topo = fabric.topo
    alg = ALGORITHMS[alg_name]
    # NCCL's NVLS kernels (all-reduce, reduce-scatter, all-gather) move data with multimem
    mech_name = "nvls_multimem" if alg_name in NVLS_ALGOS else PROTOCOLS[proto]
    mech = topo.mechanisms[mech_name]
    tuner = _tuner_latencies_us(alg_name, proto, op.kind, ctx, topo)
    base, hop, net = tuner
    steps = alg.steps(op.kind, ctx)
    if alg_name in ("nvls", "multicast"):
        steps = 1
    hops_net = 0 if ctx.nodes == 1 else (
        1 if alg_name == "collnet" else
        2 * (ctx.nodes.bit_length() - 1) if alg_name in ("nccl_tree", "nvls_tree") else
        2 * (ctx.nodes - 1) if op.kind == "all_reduce" else ctx.nodes - 1)
    t_bw = call_bandwidth_s(alg, mech, op, world_size, fabric)
    S = size_bytes(op.kind, op.bytes_per_rank, ctx.n)
    cap = float("inf")
    if proto == "LL" and alg_name == "ring":
        ceiling = ll_max_busbw_Bps(ctx, topo)
        t_bw = max(t_bw, S * BUSBW_FACTOR[op.kind](ctx.n) / ceiling)
        cap = ceiling / max(alg.channels(op.kind, ctx), 1)
    latency = (base + max(steps - hops_net, 0) * hop + hops_net * net) * US
    if alg_name == "nccl_tree":
        log = int(S // 64).bit_length() - 1
        corr = TREE_CORRECTION[proto][log] if 0 <= log < len(TREE_CORRECTION[proto]) else 1.0
        t_bw /= TREE_BW_FACTOR * corr
    if alg_name == "ring" and proto == "Simple" and ctx.nodes > 1 and \
            op.kind == "all_reduce" and S / (max(mech.sms_to_saturate, 1) * ctx.n) >= 64:
        latency *= RING_PLATEAU
    estimate = latency + t_bw
    most = mech.sms_to_saturate
    nc = channels(alg_name, proto, op.kind, op.bytes_per_rank, ctx, most)
    # LL moves each channel's share in its 32 KiB chunks: over the nc channels the call
    # advances nc chunks at a time (enqueue.cc: the chunk is per channel)
    ll = LL_CHUNK_BYTES * nc if proto == "LL" else None
    if alg_name == "nccl_tree":  # each tree's share per channel, in chunks of 128-512 KiB
        share = op.bytes_per_rank / 2 / max(alg.channels(op.kind, ctx) // 4, 1)
        chunks = max(1, min(math.ceil(share / (ll or TREE_CHUNK_MIN_BYTES)),
                            MAX_PIPELINE_CHUNKS))
    elif alg_name in ("nvls", "multicast", "nvls_tree"):
        # NVLS cuts the buffer into one slice per GPU of the node (its heads); each loop
        # moves channels x chunk of every slice, which the simulation moves as one piece
        chunk, nvls_nc = nvls_chunk_bytes(alg_name, S, ctx, topo)
        heads = ctx.per_node if ctx.nodes > 1 and ctx.per_node > 0 else ctx.n
        piece = (op.bytes_per_rank / max(heads, 1) if op.kind == "all_reduce"
                 else alg.pipelined_bytes(op.kind, op.bytes_per_rank, ctx.n))
        chunks = 1 if piece is None else max(1, min(math.ceil(piece / (chunk * nvls_nc)),
                                                     MAX_PIPELINE_CHUNKS))
    else:
        chunks = alg.pipeline_chunks(op.kind, op.bytes_per_rank, ctx.n,
                                     ll or PIPELINE_CHUNK_BYTES)
    # NCCL picks by its tuner's numbers; the call then pays what its fabrics really cost
    base, hop, net = _with_fabric_steps(tuner, proto, ctx, topo)
    return NcclChoice(alg_name, proto, mech.name, chunks, base * US,
                      hop * US, net * US, estimate, nc, cap)
