"""What a simulation returns: predicted time, per-op breakdown, utilisation, critical path."""

from __future__ import annotations

from dataclasses import dataclass, field

from pkbsim.bounds import check_result
from pkbsim.collectives.base import SWITCH
from pkbsim.placement import fabric_for
from pkbsim.sim.engine import Collective, Node, Simulation
from pkbsim.sim.strategies import Builder, CommChoice, Strategy
from pkbsim.task.schema import CommOp, TaskInstance
from pkbsim.topology.schema import Topology
from pkbsim.units import US

DATA_LINK_KINDS = ("scale_up", "pcie", "pcie_uplink", "socket", "nic", "net_uplink", "hbm")


@dataclass(frozen=True)
class OpTiming:
    id: str
    category: str  # comm | compute
    kind: str
    gpu_us: float  # busiest rank: time any part of this op was on its stream (launch included)
    host_us: float  # slowest rank: host time spent on this op (dispatch and synchronisations)
    start_us: float  # slowest rank: first start, from the measured iteration's start
    end_us: float
    choice: CommChoice | None


@dataclass(frozen=True)
class LinkUse:
    id: str
    kind: str
    utilization: float  # bytes carried / (line rate x simulated time)
    wire_bytes: float


@dataclass(frozen=True)
class Segment:
    """One step of the critical path."""

    rank: int
    track: str
    name: str
    start_us: float
    end_us: float
    why: str


@dataclass(frozen=True)
class NodeRecord:
    rank: int
    track: str
    name: str
    iteration: int
    ready_us: float
    start_us: float
    end_us: float
    work: str = "marker"  # delay, collective_call (a collective's host call), compute,
    # collective, or marker (no work: an iteration's end, a join)


@dataclass(frozen=True)
class FlowRecord:
    start_us: float
    end_us: float
    label: str
    srcs: tuple[int, ...]
    dsts: tuple[int, ...]
    nbytes: float


@dataclass(frozen=True)
class SimResult:
    instance: TaskInstance
    topology: Topology
    strategy: Strategy
    pieces: int  # custom_best: each op cut into this many pieces
    iterations: int
    predicted_us: float  # slowest rank, steady state per iteration (PKB's convention)
    per_rank_us: tuple[float, ...]
    slowest_rank: int
    window_us: tuple[float, float]  # the measured iteration on the slowest rank
    # where the measured iteration starts: window_us[0], or earlier where its critical path
    # began earlier (a host issuing it while the GPU still ran the previous one); per-op
    # start/end and the critical path listing count from here
    makespan_us: float
    iteration_start_us: float
    ops: tuple[OpTiming, ...]
    links: tuple[LinkUse, ...]
    sm_utilization: tuple[float, ...]
    critical_path: tuple[Segment, ...]
    nodes: tuple[NodeRecord, ...] = field(repr=False)
    flows: tuple[FlowRecord, ...] = field(repr=False)
    flows_started: int = 0
    rate_updates: int = 0
    topology_overrides: dict[str, object] = field(default_factory=dict, hash=False)
    tried: dict[int, float] = field(default_factory=dict, hash=False)  # pieces -> predicted
    # which simulation ran (pkbsim.symmetry): "symmetric: R of W ranks simulated, ..." or
    # "full: W ranks simulated (why)"; with symmetry, ``nodes``, ``flows`` and the critical
    # path hold the simulated ranks only, ``per_rank_us``, ``links`` and ``sm_utilization``
    # every rank and link
    symmetry: str = ""

    @property
    def critical_shares(self) -> dict[str, float]:
        """Time on the critical path (us) by what was running: host, gpu, or waiting for a
        peer."""
        shares: dict[str, float] = {}
        for seg in self.critical_path:
            key = "waiting for a peer" if seg.why.startswith("waits") else seg.why
            shares[key] = shares.get(key, 0.0) + max(seg.end_us - seg.start_us, 0.0)
        return shares

    @property
    def bound_by(self) -> str:
        """What takes most of the critical path (host, gpu, waiting for a peer), or "-"."""
        shares = self.critical_shares
        if not shares:
            return "-"
        return max(sorted(shares), key=lambda k: shares[k])


def _us(t: float | None) -> float:
    return round((t or 0.0) / US, 6)


def summarize(sim: Simulation, builder: Builder, inst: TaskInstance, strategy: Strategy,
              iterations: int) -> SimResult:
    w = inst.world_size
    ends = builder.ends
    times = [[e[r].end or 0.0 for r in range(w)] for e in ends]
    if iterations >= 2:
        per_rank = [(times[-1][r] - times[0][r]) / (iterations - 1) for r in range(w)]
    else:
        per_rank = [times[0][r] for r in range(w)]
    slowest = max(range(w), key=lambda r: (per_rank[r], -r))
    check_result(per_rank[slowest], f"task {inst.spec.key}: {strategy.name}'s predicted time")
    last = iterations - 1
    t0 = times[-2][slowest] if iterations >= 2 else 0.0
    window = (t0, times[-1][slowest])
    makespan = sim.env.now
    path = _critical_path(ends[-1][slowest], last)
    # the iteration starts when the previous one ended on the slowest rank, or earlier where
    # its critical path began earlier (a host issuing it while the GPU ran the previous one)
    begun = min([t0, *(seg.start_us * US for seg in path)])
    return SimResult(
        instance=inst, topology=sim.topo, strategy=strategy, pieces=builder.pieces,
        iterations=iterations, predicted_us=_us(per_rank[slowest]),
        per_rank_us=tuple(_us(t) for t in per_rank), slowest_rank=slowest,
        window_us=(_us(window[0]), _us(window[1])), makespan_us=_us(makespan),
        iteration_start_us=_us(begun),
        ops=_op_timings(sim, builder, inst, last, slowest, begun),
        links=_links(sim, makespan), sm_utilization=_sm_use(sim, makespan),
        critical_path=path,
        nodes=_records(sim),
        flows=tuple(FlowRecord(_us(a), _us(b), str(tag[0]), tuple(tag[1]), tuple(tag[2]), nb)
                    for a, b, tag, nb in sim.flows),
        flows_started=sim.net.flows_started, rate_updates=sim.net.rate_updates,
        symmetry=builder.classes.describe(),
    )


EXPANDED_RECORDS = 200_000  # a symmetric simulation's node records are given to every rank
# up to this many; past it only the simulated ranks' are kept (``SimResult.symmetry`` says so)


def _records(sim: Simulation) -> tuple[NodeRecord, ...]:
    """Every node's record; in a symmetric simulation each representative's for every rank it
    stands for (same times), where that makes at most EXPANDED_RECORDS."""
    classes = sim.classes
    expand = classes is not None and len(sim.nodes) * classes.class_size <= EXPANDED_RECORDS
    out = []
    for n in sim.nodes:
        times = (_us(n.ready), _us(n.start), _us(n.end),
                 n.work.kind if n.work is not None else "marker")
        ranks = classes.members(n.rank) if expand and classes is not None else (n.rank,)
        out += [NodeRecord(r, n.track, n.name, n.iteration, *times) for r in ranks]
    return tuple(out)


def _op_timings(sim: Simulation, builder: Builder, inst: TaskInstance, last: int,
                slowest: int, t0: float) -> tuple[OpTiming, ...]:
    spans: dict[str, dict[int, list[tuple[float, float]]]] = {}  # op -> rank -> intervals
    host: dict[str, float] = {}
    for n in sim.nodes:
        if n.iteration != last or n.start is None or n.end is None:
            continue
        name = n.name.split(":", 1)[0]
        if n.track == "host":
            if n.rank == slowest:
                host[name] = host.get(name, 0.0) + (n.end - n.start)
            continue
        begin = n.ready if n.ready is not None else n.start
        spans.setdefault(name, {}).setdefault(n.rank, []).append((begin, n.end))
    rows: list[tuple[str, str, str, CommChoice | None]] = []
    chosen = builder.strategy.program if builder.strategy.name == "nccl_reference" else None
    if chosen is not None:  # a traced program: one row per segment (pkbsim.trace.program)
        for i, seg in enumerate(chosen.program.segments):
            coll = seg.collective.name if seg.collective is not None else ""
            kind = f"{int(seg.kernel_count)} kernels, then {coll or seg.end}"
            rows.append((f"seg{i}", "comm" if coll else "compute", kind,
                         builder.choices.get(f"seg{i}:{coll}") if coll else None))
    else:
        rows = [(op.id, op.category, op.kind,
                 builder.choices.get(op.id) if isinstance(op, CommOp) else None)
                for op in inst.ops]
    out = []
    for op_id, category, kind, choice in rows:
        per_rank = spans.get(op_id, {})
        busy = max((_union(iv) for iv in per_rank.values()), default=0.0)
        mine = per_rank.get(slowest, [(t0, t0)])
        out.append(OpTiming(
            op_id, category, kind, _us(busy), _us(host.get(op_id, 0.0)),
            _us(min(a for a, _ in mine) - t0), _us(max(b for _, b in mine) - t0), choice))
    return tuple(out)


def _union(intervals: list[tuple[float, float]]) -> float:
    """Length of the union of intervals: pieces and repeats of one op may overlap."""
    total, reach = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b > reach:
            total += b - max(a, reach)
            reach = b
    return total


def _links(sim: Simulation, makespan: float) -> tuple[LinkUse, ...]:
    """Every data link's use; a representative link's for each link it stands for."""
    out = []
    for link in sim.net.links.values():
        if link.kind not in DATA_LINK_KINDS or makespan <= 0:
            continue
        use = round(link.wire_bytes / (link.capacity * makespan), 9)
        ids = [link.id] if sim.classes is None else sim.classes.link_members(link.id)
        out += [LinkUse(i, link.kind, use, round(link.wire_bytes, 3)) for i in ids]
    return tuple(sorted(out, key=lambda u: (-u.utilization, u.id)))


def _sm_use(sim: Simulation, makespan: float) -> tuple[float, ...]:
    sms = sim.topo.gpu.sm_count
    out = []
    rep = sim.classes.rep if sim.classes is not None else (lambda r: r)
    for r in map(rep, range(sim.world_size)):
        link = sim.net.links.get(f"gpu{r}.sm")
        compute = link.wire_bytes if link else 0.0
        busy = compute + sim.comm_sm_seconds[r]
        out.append(round(min(busy / (sms * makespan), 1.0), 6) if makespan > 0 else 0.0)
    return tuple(out)


def _critical_path(end: Node, last: int) -> tuple[Segment, ...]:
    """Walk back from the slowest rank's iteration end along the dependency that ended last;
    a collective that waited for a late peer continues at that peer."""
    path: list[Segment] = []
    node: Node | None = end
    seen: set[int] = set()
    while node is not None and node.iteration == last and node.id not in seen:
        seen.add(node.id)
        nxt = node.cause
        why = "host" if node.track == "host" else "gpu"
        if isinstance(node.work, Collective):
            run = node.work.run_
            entered = [t if t is not None else -1.0 for t in run.entered_at]
            late = max(range(len(entered)), key=lambda g: (entered[g], -g))
            peer = run.nodes[late]
            if peer is not None and peer is not node and entered[late] > (node.start or 0.0):
                why = f"waits for rank {peer.rank}"
                path.append(_segment(node, why))
                node = peer
                continue
        if (node.end or 0.0) > (node.ready or 0.0):
            path.append(_segment(node, why))
        node = nxt
    return tuple(reversed(path))


def _segment(node: Node, why: str) -> Segment:
    return Segment(node.rank, node.track, node.name, _us(node.ready), _us(node.end), why)


def flow_links(result: SimResult) -> list[tuple[str, ...]]:
    """The links each of ``result.flows`` crosses, in the same order.

    Point to point: the fabric's route. Several sources or destinations (NVSwitch multicast,
    in-switch reduction): each source's port to the switch and each destination's port from it.
    Compute (no destinations): each source's HBM.
    """
    fabric = fabric_for(result.topology)
    out = []
    for f in result.flows:
        if not f.dsts:
            ids = [f"gpu{r}.hbm" for r in f.srcs]
        elif len(f.srcs) == 1 and len(f.dsts) == 1:
            ids = list(fabric.route(f.srcs[0], f.dsts[0]))
        else:
            ids = [fabric.route(s, SWITCH)[0] for s in f.srcs]
            ids += [fabric.route(SWITCH, d)[0] for d in f.dsts]
        out.append(tuple(dict.fromkeys(ids)))
    return out
