"""The simulator's prediction for one measured operation (the error report's model side).

Each op of the results catalogue (pkbsim/validation/results.py ``OPS``) is rebuilt as a small
graph of simulator nodes on the topology (pkbsim/sim: host and stream nodes, HBM flows,
collective calls, NCCL's choice) and run; the prediction is the simulated time, never a
separate formula, so the report measures the simulator itself. Ops the model has no
counterpart for get a reason instead (``explain``); ``predict`` returns None for them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pkbsim.collectives import ALGORITHMS
from pkbsim.collectives.bandwidth import size_bytes
from pkbsim.collectives.base import Context
from pkbsim.placement import fabric_for, fits, group_context
from pkbsim.sim import nccl
from pkbsim.sim.collective import CallSpec
from pkbsim.sim.engine import (
    Collective,
    Compute,
    Delay,
    Node,
    SimOptions,
    Simulation,
    Work,
    comm_sms,
)
from pkbsim.sim.network import Flow
from pkbsim.task.schema import COMM_KINDS, CommOp
from pkbsim.topology.fabric import PCIE
from pkbsim.topology.schema import Topology
from pkbsim.units import GB, US
from pkbsim.validation.results import Measurement

CHAIN = 8  # back-to-back nodes simulated for a per-launch or steady per-call time
TORCH_OP_HBM_BYTES = 2 * 1024 * 4  # torch.add on 1,024 fp32 elements: read 4 KiB, write 4 KiB
DIST_CALL_BYTES = 2048  # host_dist_call's tensor when the measurement gives no size
# NCCL_ALGO -> model algorithm
NCCL_ALGOS = {"ring": "ring", "tree": "nccl_tree", "nvls": "nvls", "nvlstree": "nvls_tree"}
NCCL_PROTOS = {p.lower(): p for p in nccl.PROTOCOLS}  # NCCL_PROTO (any case) -> LL, LL128, Simple
NOT_MODELLED = {
    "launch_eager_host": "host time of a CuPy launch: the model has one host cost per eager "
                         "PyTorch op (latency.host_launch_us), not per raw launch",
    "launch_sync_roundtrip": "launch plus synchronise wall time: the model has no "
                             "host-to-GPU wake-up latency",
}


@dataclass(frozen=True)
class Prediction:
    predicted_s: float
    model: str  # how it was predicted: the simulated graph and the parameters it used

    @property
    def predicted_us(self) -> float:
        return self.predicted_s / US


def predict(m: Measurement, topo: Topology, *, multicast: bool = False) -> Prediction | None:
    """The simulator's time for ``m``'s operation on ``topo``; None where the model has no
    counterpart. NCCL's choice leaves NVLS out unless the measurement forced it
    (``nccl_algo`` NVLS) or ``multicast`` is True: validation runs keep multicast off."""
    found = explain(m, topo, multicast=multicast)
    return found if isinstance(found, Prediction) else None


def explain(m: Measurement, topo: Topology, *, multicast: bool = False) -> Prediction | str:
    """A prediction, or why the model has none."""
    if m.op in NOT_MODELLED:
        return NOT_MODELLED[m.op]
    handler = _HANDLERS.get(m.op)
    if handler is None:
        return f"op {m.op} has no model counterpart"
    return handler(m, topo, multicast)


# ------------------------------------------------------------------ simulation helpers

def _sim(topo: Topology, world_size: int) -> Simulation:
    return Simulation(topo, world_size, SimOptions(iterations=1, hbm_contention=False))


def _cached(topo: Topology, key: tuple[Any, ...], run: Callable[[], float]) -> float:
    """Simulated seconds, memoised per topology (beside the simulator's own call times)."""
    cache = fabric_for(topo).call_times
    full = ("validation", *key)
    if full not in cache:
        cache[full] = run()
    return cache[full]


def _end(node: Node) -> float:
    assert node.end is not None
    return node.end


class _Transfer(Work):
    """One flow of ``nbytes`` over links given as (id, kind, capacity in B/s, weight)."""

    def __init__(self, nbytes: float, links: list[tuple[str, str, float, float]]) -> None:
        self.nbytes = nbytes
        self.links = links

    def run(self, sim: Simulation, node: Node, done: Callable[[], None]) -> None:
        uses = [(sim.net.link(i, kind, cap), w) for i, kind, cap, w in self.links]

        def finished(_flow: Flow) -> None:
            done()

        sim.net.start(uses, self.nbytes, finished, tag=(node.name, (node.rank,), ()))


def _one_node(topo: Topology, name: str, launch_s: float, work: Work | None) -> float:
    """One stream node alone on an idle GPU: its launch overhead, then its work."""
    sim = _sim(topo, 1)
    node = sim.node(0, "stream0", name, 0, work, launch_s=launch_s)
    sim.run()
    return _end(node)


def _members_ctx(members: list[int], topo: Topology, **kw: Any) -> Context:
    nodes: dict[int, int] = {}
    for r in members:
        nodes[topo.node_of(r)] = nodes.get(topo.node_of(r), 0) + 1
    sizes = set(nodes.values())
    return Context(n=len(members), nodes=len(nodes),
                   per_node=sizes.pop() if len(sizes) == 1 else 0, **kw)


def _call_alone(topo: Topology, spec: CallSpec, members: list[int], launch_s: float) -> float:
    """One call on an idle machine, every member's stream node launched at time 0; the
    slowest member's end (as pkbsim.sim.engine.run_call, with the kernel launch)."""
    sim = _sim(topo, max(members) + 1)
    run = sim.collective(spec, members)
    nodes = [sim.node(r, "stream0", spec.label, 0, Collective(run, g), launch_s=launch_s)
             for g, r in enumerate(members)]
    sim.run()
    return max(_end(n) for n in nodes)


def _param_int(m: Measurement, key: str, default: int | None = None) -> int | None:
    value = m.params.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not float(value).is_integer():
        return None
    return int(value)


# ------------------------------------------------------------------ one GPU

def _d2d_copy_engine(m: Measurement, topo: Topology, _mc: bool) -> Prediction | str:
    ce = topo.mechanisms.get("copy_engine")
    if ce is None:
        return "topology has no copy_engine mechanism"
    t = _cached(topo, ("d2d_ce", m.size_bytes), lambda: _one_node(
        topo, m.op, ce.latency_s, Compute(0.0, 2.0 * m.size_bytes)))
    return Prediction(t, f"copy_engine.latency_us {ce.latency_us:g} + 2 x size over HBM "
                         f"{_hbm_GBps(topo):g} GB/s (one stream node, one HBM flow)")


def _hbm_GBps(topo: Topology) -> float:
    return topo.gpu.hbm_Bps / GB


def _d2d_sm_copy(m: Measurement, topo: Topology, _mc: bool) -> Prediction | str:
    blocks = _param_int(m, "blocks")
    sms = topo.gpu.sm_count
    sized = m.params.get("sweep") == "size"  # the grid sized to the data, as a library's is
    if not sized and (blocks is None or blocks < sms):
        return (f"SM copy on fewer thread blocks than SMs ({sms}): the model has no per-SM "
                "HBM rate")
    eager, ramp = topo.latency.eager_kernel_us, topo.latency.kernel_ramp_us
    t = _cached(topo, ("d2d_sm", m.size_bytes), lambda: _one_node(
        topo, m.op, (eager + ramp) * US, Compute(0.0, 2.0 * m.size_bytes)))
    return Prediction(t, f"latency.eager_launch_us {eager:g} + kernel_ramp_us {ramp:g} + 2 x "
                         f"size over HBM "
                         f"{_hbm_GBps(topo):g} GB/s (one stream node, one HBM flow)")


def _launch(m: Measurement, topo: Topology, _mc: bool) -> Prediction | str:
    graph = m.op == "launch_graph_node"
    launch = topo.latency.kernel_launch_us if graph else topo.latency.eager_kernel_us
    field = "kernel_launch_us" if graph else "eager_launch_us"

    def chain() -> float:
        sim = _sim(topo, 1)
        prev: Node | None = None
        for i in range(CHAIN):
            prev = sim.node(0, "stream0", m.op, i, None, [prev], launch * US)
        sim.run()
        assert prev is not None
        return _end(prev) / CHAIN

    t = _cached(topo, ("launch", graph), chain)
    return Prediction(t, f"latency.{field} {launch:g} per node "
                         f"(a chain of {CHAIN} empty stream nodes)")


def _steady(ends: list[float]) -> float:
    """Per-iteration time of back-to-back iterations, from the second on."""
    return (ends[-1] - ends[0]) / (len(ends) - 1)


def _host_torch_op(m: Measurement, topo: Topology, _mc: bool) -> Prediction | str:
    lat = topo.latency

    def loop() -> float:
        sim = _sim(topo, 1)
        host: Node | None = None
        gpu: Node | None = None
        for i in range(CHAIN):
            host = sim.node(0, "host", m.op, i, Delay(lat.host_launch_us * US), [host])
            gpu = sim.node(0, "stream0", m.op, i, Compute(0.0, TORCH_OP_HBM_BYTES),
                           [host, gpu], lat.eager_kernel_us * US)
        sim.run()
        ends = [_end(n) for n in sim.nodes if n.track == "stream0"]
        return _steady(ends)

    t = _cached(topo, ("torch_op",), loop)
    return Prediction(t, f"Python loop: host nodes of latency.host_launch_us "
                         f"{lat.host_launch_us:g} feeding stream nodes of eager_launch_us "
                         f"{lat.eager_kernel_us:g} + an 8 KiB kernel; steady per op")


def _host_dist_call(m: Measurement, topo: Topology, multicast: bool) -> Prediction | str:
    if _backend(m) != "nccl":
        return f"backend {_backend(m)}: the model is NCCL's"
    w = _param_int(m, "world_size", 1)
    kind = _kind(m.params.get("collective", "all_reduce"))
    if w is None or w < 1:
        return "params.world_size is not a positive integer"
    if kind is None:
        return f"unknown collective {m.params.get('collective')!r}"
    if w > topo.total_gpus:
        return f"world size {w} exceeds the topology's {topo.total_gpus} GPUs"
    nbytes = m.size_bytes or DIST_CALL_BYTES
    made = _nccl_spec(topo, kind, nbytes, w, None, None, multicast)
    if isinstance(made, str):
        return made
    spec, what = made
    lat = topo.latency

    def loop() -> float:
        sim = _sim(topo, w)
        host: list[Node | None] = [None] * w
        gpu: list[Node | None] = [None] * w
        ends: list[list[float]] = []
        for i in range(CHAIN):
            run = sim.collective(spec, list(range(w)))
            for r in range(w):
                host[r] = sim.node(r, "host", m.op, i, Delay(lat.host_collective_us * US),
                                   [host[r]])
                gpu[r] = sim.node(r, "stream0", m.op, i, Collective(run, r), [host[r], gpu[r]],
                                  lat.eager_kernel_us * US)
        sim.run()
        for r in range(w):
            ends.append([_end(n) for n in sim.nodes if n.rank == r and n.track == "stream0"])
        return max(_steady(e) for e in ends)

    t = _cached(topo, ("dist_call", kind, nbytes, w, multicast), loop)
    return Prediction(t, f"Python loop: host nodes of latency.host_collective_us "
                         f"{lat.host_collective_us:g} feeding {what} on {w} rank(s) "
                         f"(+ eager_launch_us {lat.eager_kernel_us:g}); steady per call")


def _host_sync(m: Measurement, topo: Topology, _mc: bool) -> Prediction | str:
    sync = topo.latency.host_sync_us

    def one() -> float:
        sim = _sim(topo, 1)
        node = sim.node(0, "host", m.op, 0, Delay(sync * US))
        sim.run()
        return _end(node)

    return Prediction(_cached(topo, ("sync",), one),
                      f"latency.host_sync_us {sync:g} (one host node, the stream idle)")


def _host_copy(m: Measurement, topo: Topology, _mc: bool) -> Prediction | str:
    p = topo.pcie
    way = "h2d" if m.op == "h2d_pinned" else "d2h"
    link = (f"gpu0.host.{way}", PCIE, p.gpu_link_GBps * GB, 1.0 / p.gpu_link_efficiency)
    t = _cached(topo, (way, m.size_bytes), lambda: _one_node(
        topo, m.op, p.latency_us * US, _Transfer(float(m.size_bytes), [link])))
    return Prediction(t, f"pcie.latency_us {p.latency_us:g} + size over PCIe "
                         f"{p.gpu_link_GBps:g} GB/s x {p.gpu_link_efficiency:g} "
                         "(one stream node, one flow)")


# ------------------------------------------------------------------ peers

def _peer(m: Measurement, topo: Topology, _mc: bool) -> Prediction | str:
    mech_name = {"peer_copy_engine": "copy_engine", "peer_sm_ldst": "sm_ldst",
                 "peer_tma": "tma"}[m.op]
    mech = topo.mechanisms.get(mech_name)
    if mech is None:
        return f"topology has no {mech_name} mechanism"
    src, dst = _param_int(m, "src", 0), _param_int(m, "dst", 1)
    if src is None or dst is None or src == dst or min(src, dst) < 0:
        return "params.src and params.dst are not two distinct GPU indices"
    if max(src, dst) >= topo.total_gpus:
        return f"GPU {max(src, dst)} is beyond the topology's {topo.total_gpus} GPUs"
    sms: int | None = None
    if mech.traits.uses_sms:
        sms = _param_int(m, "blocks")
        if sms is None or sms < 1:
            return "params.blocks is not a positive integer"
    bidir = m.params.get("direction") == "bidir"
    pull = m.params.get("mode") == "pull"
    members = [dst, src] if pull else [src, dst]  # data flows from members[0]
    if bidir:  # both at once: each sends to the other
        kind, ctx = "send_recv", _members_ctx(members, topo, pattern="pairs")
    else:  # one way: the direct broadcast of two ranks is one flow from its root
        kind, ctx = "broadcast", _members_ctx(members, topo, root=0)
    net = topo.scale_out.latency_us * US if topo.scale_out else 0.0
    spec = CallSpec(ALGORITHMS["direct"], mech, kind, float(m.size_bytes), ctx, 1,
                    mech.latency_s, mech.step_latency_s, net, comm_sms(mech, sms), m.op)
    # an SM kernel is launched eagerly (eager_launch_us); a copy's issue cost is its latency_us
    launch = topo.latency.eager_kernel_us if mech.traits.uses_sms else 0.0
    t = _cached(topo, (m.op, m.size_bytes, tuple(members), bidir, sms),
                lambda: _call_alone(topo, spec, members, launch * US))
    how = "both directions at once" if bidir else "one direction"
    extra = f", {sms} SMs of sms_to_saturate {mech.sms_to_saturate}" if sms is not None else ""
    head = f"eager_launch_us {launch:g} + " if launch else ""
    return Prediction(t, f"{head}{mech_name}.latency_us {mech.latency_us:g} + size at "
                         f"{mech_name}.efficiency {mech.efficiency:g} of "
                         f"{topo.peer_line_rate_GBps:g} GB/s{extra} + step_latency_us "
                         f"{mech.step_latency_us:g}, {how} (direct {kind} of 2 ranks)")


def _flag_roundtrip(m: Measurement, topo: Topology, _mc: bool) -> Prediction | str:
    src, dst = _param_int(m, "src", 0), _param_int(m, "dst", 1)
    if src is None or dst is None or src == dst or min(src, dst) < 0:
        return "params.src and params.dst are not two distinct GPU indices"
    if max(src, dst) >= topo.total_gpus:
        return f"GPU {max(src, dst)} is beyond the topology's {topo.total_gpus} GPUs"
    signal = topo.scale_up.signal_latency_us

    def ping_pong() -> float:
        sim = _sim(topo, max(src, dst) + 1)
        ping = sim.node(src, "stream0", "ping", 0, Delay(signal * US))
        pong = sim.node(dst, "stream0", "pong", 0, Delay(signal * US), [ping])
        sim.run()
        return _end(pong)

    t = _cached(topo, ("flag", src, dst), ping_pong)
    return Prediction(t, f"2 x scale_up.signal_latency_us {signal:g} (a chain of two nodes: "
                         "the flag there, the answer back)")


# ------------------------------------------------------------------ NCCL

def _kind(name: Any) -> str | None:
    """A collective's name as torch.distributed or nccl-tests spell it -> the model's kind."""
    if not isinstance(name, str):
        return None
    flat = name.lower()
    for suffix in ("_perf", "_into_tensor", "_tensor", "_single"):
        flat = flat.removesuffix(suffix)
    flat = flat.replace("_", "")
    for kind in COMM_KINDS:
        if kind.replace("_", "") == flat:
            return kind
    return None


def _backend(m: Measurement) -> str:
    return str(m.params.get("backend") or "nccl")


def _op(kind: str, nbytes: float, w: int) -> CommOp:
    return CommOp(id="call", kind=kind, bytes_per_rank=nbytes, dtype="fp32", group="world",
                  group_size=w, group_layout="contiguous", root=0, reduce_op=None,
                  pattern="ring" if kind == "send_recv" else None, data_dependent=False,
                  imbalance=1.0, repeat=1, chain=False, after=(), host_syncs=0, api="",
                  note="")


def _nccl_spec(topo: Topology, kind: str, nbytes: float, w: int, algorithm: str | None,
               protocol: str | None, multicast: bool) -> tuple[CallSpec, str] | str:
    """The call NCCL's tuner picks (or the forced pair), built as nccl_reference builds it."""
    op = _op(kind, nbytes, w)
    members = list(range(w))
    ctx = group_context(op, members, topo)
    fabric = fabric_for(topo)
    if algorithm is None and not multicast:  # NVLS disabled in the run: tune without it
        algs = sorted({a for a, _p in nccl.candidates(kind, ctx, topo)
                       if a not in ("nvls", "multicast")})
        if not algs:
            return f"no NCCL algorithm for {kind} without NVLS"
        if len(algs) == 1 and algs[0] == "direct":
            choice = nccl.choose(op, nbytes, ctx, w, fabric, None, protocol)
        else:
            choice = min((nccl.choose(op, nbytes, ctx, w, fabric, a, protocol) for a in algs),
                         key=lambda c: c.estimate_s)
    else:
        choice = nccl.choose(op, nbytes, ctx, w, fabric, algorithm, protocol)
    mech = topo.mechanisms.get(choice.mechanism)
    alg = ALGORITHMS[choice.algorithm]
    if mech is None:
        return f"topology has no {choice.mechanism} mechanism"
    if not alg.applies(kind, ctx) or not fits(alg, mech, kind):
        return f"NCCL {choice.algorithm}/{choice.protocol} cannot carry {kind} in the model"
    spec = CallSpec(alg, mech, kind, nbytes, ctx, choice.chunks, choice.start_latency_s,
                    choice.step_latency_s, choice.net_latency_s,
                    comm_sms(mech, choice.channels), kind, choice.flow_cap_Bps)
    return spec, (f"NCCL {kind} {choice.algorithm}/{choice.protocol} ({mech.name}, "
                  f"{choice.chunks} chunk(s))")


def _forced(m: Measurement) -> tuple[str | None, str | None] | str:
    """NCCL_ALGO / NCCL_PROTO of the run as the model's names (None: NCCL's own choice)."""
    algo, proto = m.params.get("nccl_algo"), m.params.get("nccl_proto")
    kind = _kind(m.params.get("collective"))
    out_algo = out_proto = None
    if algo:
        out_algo = NCCL_ALGOS.get(str(algo).lower())
        if out_algo is None:
            return f"NCCL_ALGO={algo} has no model counterpart"
        if out_algo == "nvls" and kind == "all_gather":
            out_algo = "multicast"  # NCCL's NVLS all-gather writes with multimem.st
    if proto:
        out_proto = NCCL_PROTOS.get(str(proto).lower())
        if out_proto is None:
            return f"NCCL_PROTO={proto} has no model counterpart"
    return out_algo, out_proto


def _nccl_collective(m: Measurement, topo: Topology, multicast: bool) -> Prediction | str:
    if _backend(m) != "nccl":
        return f"backend {_backend(m)}: the model is NCCL's"
    kind = _kind(m.params.get("collective"))
    w = _param_int(m, "world_size")
    if kind is None:
        return f"unknown collective {m.params.get('collective')!r}"
    if w is None or w < 1:
        return "params.world_size is not a positive integer"
    if w > topo.total_gpus:
        return f"world size {w} exceeds the topology's {topo.total_gpus} GPUs"
    forced = _forced(m)
    if isinstance(forced, str):
        return forced
    nbytes = m.size_bytes / size_bytes(kind, 1.0, w)  # nccl-tests' S back to bytes per rank
    made = _nccl_spec(topo, kind, nbytes, w, *forced, multicast)
    if isinstance(made, str):
        return made
    spec, what = made
    launch = topo.latency.eager_kernel_us
    t = _cached(topo, ("nccl", kind, nbytes, w, forced, multicast),
                lambda: _call_alone(topo, spec, list(range(w)), launch * US))
    return Prediction(t, f"eager_launch_us {launch:g} + {what} on {w} rank(s), simulated "
                         "alone")


_HANDLERS: dict[str, Callable[[Measurement, Topology, bool], Prediction | str]] = {
    "d2d_copy_engine": _d2d_copy_engine,
    "d2d_sm_copy": _d2d_sm_copy,
    "launch_graph_node": _launch,
    "launch_eager_queued": _launch,
    "host_torch_op": _host_torch_op,
    "host_dist_call": _host_dist_call,
    "host_item_sync": _host_sync,
    "host_synchronize": _host_sync,
    "h2d_pinned": _host_copy,
    "d2h_pinned": _host_copy,
    "peer_copy_engine": _peer,
    "peer_sm_ldst": _peer,
    "peer_tma": _peer,
    "peer_flag_roundtrip": _flag_roundtrip,
    "nccl_collective": _nccl_collective,
}
