"""The simulator's prediction as a timeline, so that it splits into the same terms as a trace.

The slowest rank's measured iteration (``SimResult.window_us``) is the one call. Its stream
nodes are the GPU: a collective is communication; a traced segment's kernels (or a task op's)
run as one node, cut here into consecutive pieces per kernel kind in proportion to each kind's
modelled time (``pkbsim.trace.cost.kernel_time_s``). Its host nodes are the host: a
``<name>:sync`` node is a synchronisation, a collective's host call is ``c10d (modelled)``,
the rest ``host dispatch (modelled)``. Pure.
"""

from __future__ import annotations

from pkbsim.sim.result import NodeRecord, SimResult
from pkbsim.task.schema import ComputeOp
from pkbsim.timeline.events import Call, GpuOp, HostSpan, Timeline
from pkbsim.trace.cost import kernel_time_s
from pkbsim.trace.program import Program

SYNC_SUFFIX = ":sync"
HOST_CALL = "c10d (modelled)"
HOST_DISPATCH = "host dispatch (modelled)"


def model_timeline(result: SimResult, program: Program | None = None) -> Timeline:
    """The predicted iteration of ``result`` (the program it ran, if a traced one)."""
    rank = result.slowest_rank
    start, end = result.window_us
    nodes = [n for n in result.nodes if n.rank == rank and n.end_us > start
             and n.start_us < end]
    kinds = _kinds(result, program)
    gpu: list[GpuOp] = []
    host: list[HostSpan] = []
    syncs: list[HostSpan] = []
    for n in nodes:
        if n.end_us <= n.start_us:
            continue
        if n.track == "host":
            span = HostSpan(n.start_us, n.end_us,
                            HOST_CALL if n.work == "collective_call" else HOST_DISPATCH)
            (syncs if n.name.endswith(SYNC_SUFFIX) else host).append(
                HostSpan(n.start_us, n.end_us, n.name) if n.name.endswith(SYNC_SUFFIX)
                else span)
        elif n.work == "collective":
            gpu.append(GpuOp(n.start_us, n.end_us, n.name, "communication", True, 0))
        elif n.work == "compute":
            gpu.extend(_pieces(n, kinds.get(n.name, {"other": 1.0})))
    gpu.sort(key=lambda o: (o.start_us, o.end_us))
    host.sort(key=lambda h: h.start_us)
    syncs.sort(key=lambda h: h.start_us)
    call = Call(0, start, end, start, end)
    return Timeline("model", rank, result.instance.world_size, (call,), tuple(gpu),
                    tuple(_outermost(host)), tuple(syncs), "the simulated iteration")


def _pieces(node: NodeRecord, shares: dict[str, float]) -> list[GpuOp]:
    total = sum(shares.values()) or 1.0
    out = []
    t = node.start_us
    span = node.end_us - node.start_us
    for kind, weight in sorted(shares.items()):
        d = span * weight / total
        out.append(GpuOp(t, t + d, node.name, kind, False, 0))
        t += d
    return out


def _kinds(result: SimResult, program: Program | None) -> dict[str, dict[str, float]]:
    """Per stream-node name: each kernel kind's share of the node's modelled time."""
    topo = result.topology
    out: dict[str, dict[str, float]] = {}
    if program is not None:
        for index, seg in enumerate(program.segments):
            shares: dict[str, float] = {}
            for k in seg.kernels:
                shares[k.kind] = shares.get(k.kind, 0.0) + k.count * kernel_time_s(k, topo)
            if shares:
                out[f"seg{index}"] = shares
        return out
    for op in result.instance.ops:
        if isinstance(op, ComputeOp):
            out[op.id] = {op.kind: 1.0}
    return out


def _outermost(spans: list[HostSpan]) -> list[HostSpan]:
    out: list[HostSpan] = []
    for s in spans:
        if out and s.start_us < out[-1].end_us:
            continue
        out.append(s)
    return out
