"""The simulation engine: a simpy clock, the network of links, and a graph of timed nodes.

Everything that takes time is a :class:`Node` on a track: a host thread's dispatch of an op
(``rank3/host``), a kernel or a collective on a GPU stream (``rank3/stream0``). A node starts
when every node it depends on has ended, spends its launch overhead, then runs its work: a
fixed delay, a compute kernel (a flow over the GPU's HBM and SM links, so concurrent work slows
it), or its rank's part of a collective call. Strategies (pkbsim/sim/strategies.py) build the
graph; :meth:`Simulation.run` runs it. Nothing here prints or writes files.
"""

from __future__ import annotations

import gc
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import simpy

from pkbsim import symmetry as sym
from pkbsim.collectives.base import SWITCH
from pkbsim.errors import InfeasibleError
from pkbsim.placement import fabric_for, link_efficiency
from pkbsim.sim.collective import CallImages, CallSpec, CollectiveRun, queues_copies
from pkbsim.sim.network import Flow, FlowBudget, Link, Network
from pkbsim.symmetry import Classes
from pkbsim.topology.fabric import NIC, UPLINK_NET
from pkbsim.topology.schema import Mechanism, Topology


@dataclass
class Node:
    """One timed piece of work on one track."""

    id: int
    rank: int
    track: str  # "host", "stream0", ...
    name: str  # the op id (or a label such as "sync")
    iteration: int
    launch_s: float = 0.0
    deps: list[Node] = field(default_factory=list)
    work: Work | None = None
    # filled while running
    ready: float | None = None  # all dependencies ended
    start: float | None = None  # after the launch overhead
    end: float | None = None
    cause: Node | None = None  # the dependency that ended last
    _left: int = 0
    _dependents: list[Node] = field(default_factory=list)

    def __hash__(self) -> int:
        return self.id


class Work:
    """What a node does once started; calls ``done()`` when finished."""

    kind = "work"  # what the node records say it did

    def run(self, sim: Simulation, node: Node, done: Callable[[], None]) -> None:
        raise NotImplementedError


class Delay(Work):
    """A fixed time: host dispatch (``kind`` "collective_call" for a collective's host call),
    a host synchronisation."""

    def __init__(self, seconds: float, kind: str = "delay") -> None:
        self.seconds = seconds
        self.kind = kind

    def run(self, sim: Simulation, node: Node, done: Callable[[], None]) -> None:
        if self.seconds > 0:
            ev = sim.env.timeout(self.seconds)
            ev.callbacks.append(lambda _e: done())
        else:
            done()


class Compute(Work):
    """A kernel needing ``t_comp_s`` with every SM and ``hbm_bytes`` of memory traffic.

    It is one flow over the GPU's HBM link (one unit per byte) and SM link (SM-seconds per
    byte), so it runs at max(t_mem, t_comp) alone and slower when communication holds SMs or
    moves bytes through the same HBM.
    """

    kind = "compute"

    def __init__(self, t_comp_s: float, hbm_bytes: float) -> None:
        self.t_comp_s = t_comp_s
        self.hbm_bytes = hbm_bytes

    def run(self, sim: Simulation, node: Node, done: Callable[[], None]) -> None:
        hbm, sm = sim.hbm_link(node.rank), sim.sm_link(node.rank)
        sms = sim.topo.gpu.sm_count
        if self.hbm_bytes > 0:
            uses = [(hbm, 1.0)]
            if self.t_comp_s > 0:
                uses.append((sm, sms * self.t_comp_s / self.hbm_bytes))
            amount = self.hbm_bytes
        elif self.t_comp_s > 0:
            uses, amount = [(sm, float(sms))], self.t_comp_s
        else:
            done()
            return
        def finished(flow: Flow) -> None:
            if sim.options.trace:
                sim.record_flow(flow)
            done()

        sim.net.start(uses, amount, finished, tag=(node.name, (node.rank,), ()))


class Collective(Work):
    """This rank's part of a collective call (one :class:`CollectiveRun` for all members)."""

    kind = "collective"

    def __init__(self, run: CollectiveRun, group_rank: int) -> None:
        self.run_ = run
        self.group_rank = group_rank

    def run(self, sim: Simulation, node: Node, done: Callable[[], None]) -> None:
        sms = self.run_.spec.comm_sms
        sim.hold_sms(node.rank, sms)

        def finished() -> None:
            sim.hold_sms(node.rank, -sms)
            done()

        self.run_.finishers[self.group_rank] = finished
        self.run_.nodes[self.group_rank] = node
        self.run_.enter(self.group_rank)


def run_call(topo: Topology, world_size: int, spec: CallSpec, members: list[int],
             budget: FlowBudget | None = None, launch_s: float = 0.0,
             symmetry: bool = True) -> tuple[Simulation, list[Node | None]]:
    """One collective call alone on an idle machine, every member entering at time 0 (after
    ``launch_s``); its transfers drawn on ``budget`` (the prediction it serves) where given.
    One rank per class of equivalent ranks is simulated where the call allows it
    (pkbsim.symmetry); the nodes of the others are their representatives'."""
    classes = sym.start(topo, world_size, symmetry)
    if classes.symmetric:
        needs = sym.call_steps(classes, spec.algorithm, spec.kind, spec.ctx, [members],
                               queues_copies(spec, topo))
        if needs is not None:
            classes = sym.restrict(classes, *needs)
    sim = Simulation(topo, world_size, SimOptions(iterations=1, hbm_contention=False), budget,
                     classes)
    ranks = set(classes.ranks)
    runs = sim.collective_call(spec, [members])
    mine = {r: sim.node(r, "stream0", spec.label, 0, Collective(runs[0], g),
                        launch_s=launch_s)
            for g, r in enumerate(members) if r in ranks}
    sim.run()
    return sim, [mine.get(classes.rep(r)) for r in members]


def comm_sms(mech: Mechanism, requested: int | None) -> int:
    """SMs a call on ``mech`` holds: the request, else what saturates it; a copy engine none."""
    if not mech.traits.uses_sms:
        return 0
    return requested if requested is not None else mech.sms_to_saturate


@dataclass
class SimOptions:
    iterations: int = 3  # back to back, as PKB times them; steady state from the second on
    trace: bool = False  # keep every flow for the timeline
    hbm_contention: bool = True  # communication reads and writes HBM at both ends
    symmetry: bool = True  # simulate one rank per class of equivalent ranks where possible


class Simulation:
    """One run: ``world_size`` ranks of ``topo`` placed node by node."""

    def __init__(self, topo: Topology, world_size: int, options: SimOptions | None = None,
                 budget: FlowBudget | None = None, classes: Classes | None = None) -> None:
        self.topo = topo
        self.world_size = world_size
        # which ranks stand for which (pkbsim.symmetry): ``classes`` None when every rank
        # is simulated; ``decided`` as found, with its reason
        self.decided = classes
        self.classes = classes if classes is not None and classes.symmetric else None
        self.options = options or SimOptions()
        self.env = simpy.Environment()
        self.net = Network(self.env, budget)
        self.fabric = fabric_for(topo)
        self.nodes: list[Node] = []
        self.flows: list[tuple[float, float, Any, float]] = []  # (start, end, tag, bytes)
        self._uses: dict[tuple[Any, ...], tuple[list[tuple[Link, float]], bool,
                                                 tuple[tuple[int, float], ...] | None]] = {}
        self._hbm_comm = [0.0] * world_size  # bytes/s communication moves through each HBM
        self._hbm_since = [0.0] * world_size
        self._hbm: list[Link | None] = [None] * world_size
        self._ce_free = [topo.gpu.copy_engines] * world_size
        self._ce_queue: list[deque[Callable[[], None]]] = [deque() for _ in range(world_size)]
        self.net.on_rate = self._comm_hbm
        self._held = [0] * world_size
        self.comm_sm_seconds = [0.0] * world_size
        self._held_since = [0.0] * world_size

    # ------------------------------------------------------------ building

    def node(self, rank: int, track: str, name: str, iteration: int, work: Work | None = None,
             deps: list[Node | None] | None = None, launch_s: float = 0.0) -> Node:
        node = Node(len(self.nodes), rank, track, name, iteration, launch_s,
                    [d for d in (deps or []) if d is not None], work)
        self.nodes.append(node)
        return node

    def collective(self, spec: CallSpec, members: list[int]) -> CollectiveRun:
        run = CollectiveRun(self, spec, members)
        return run

    def collective_call(self, spec: CallSpec, groups: list[list[int]]) -> list[CollectiveRun]:
        """One call in each of ``groups``: a run per group that holds a simulated rank (every
        group on the full path), the others' members standing in for through the call's
        images."""
        classes = self.classes
        if classes is None:
            return [CollectiveRun(self, spec, m) for m in groups]
        images = CallImages(classes, len(groups) == 1)
        ranks = set(classes.ranks)
        return [CollectiveRun(self, spec, m, images) for m in groups
                if any(r in ranks for r in m)]

    # ------------------------------------------------------------ links

    def hbm_link(self, rank: int) -> Link:
        link = self._hbm[rank]
        if link is None:
            link = self._hbm[rank] = self.net.link(f"gpu{rank}.hbm", "hbm",
                                                   self.topo.gpu.hbm_Bps)
        return link

    def sm_link(self, rank: int) -> Link:
        sms = self.topo.gpu.sm_count
        return self.net.link(f"gpu{rank}.sm", "sm", float(max(sms - self._held[rank], 1)))

    def copy_engine(self, rank: int, start: Callable[[], None]) -> None:
        """Run ``start`` when one of ``rank``'s copy engines is free (copies beyond
        ``gpu.copy_engines`` at once wait their turn, in order)."""
        if self._ce_free[rank] > 0:
            self._ce_free[rank] -= 1
            start()
        else:
            self._ce_queue[rank].append(start)

    def copy_engine_done(self, rank: int) -> None:
        queue = self._ce_queue[rank]
        if queue:
            queue.popleft()()
        else:
            self._ce_free[rank] += 1

    def hold_sms(self, rank: int, delta: int) -> None:
        if delta == 0:
            return
        now = self.env.now
        self.comm_sm_seconds[rank] += self._held[rank] * (now - self._held_since[rank])
        self._held_since[rank] = now
        self._held[rank] += delta
        free = max(self.topo.gpu.sm_count - self._held[rank], 1)  # compute keeps one SM
        self.net.set_capacity(self.sm_link(rank), float(free))

    def uses(self, srcs: tuple[int, ...], dsts: tuple[int, ...], mech: Mechanism,
             issuer: int, comm_sms: int
             ) -> tuple[list[tuple[Link, float]], bool, tuple[tuple[int, float], ...] | None]:
        """Links (with capacity per payload byte) a send crosses, whether it crosses a NIC, and
        the HBM bytes per payload byte it moves on each GPU (None when HBM is not modelled).
        In a symmetric simulation each link is its representative's, weighted by the flows
        the send stands for there (pkbsim.symmetry)."""
        key = (srcs, dsts, mech.name, issuer, comm_sms)
        found = self._uses.get(key)
        if found is not None:
            return found
        wires, crosses = self._wires(srcs, dsts, mech, issuer, comm_sms)
        hbm: dict[int, float] = {}
        if self.options.hbm_contention:  # each source reads, each destination writes
            for r in (*srcs, *dsts):
                hbm[r] = hbm.get(r, 0.0) + 1.0
        classes = self.classes
        if classes is not None:
            moved: list[tuple[str, str, float, float]] = []
            for link_id, kind, capacity, w in wires:
                rep_id, weight = classes.link(link_id)
                moved.append((rep_id, kind, capacity, w * weight))
            wires = moved
            side: dict[int, float] = {}
            for r, per_byte in hbm.items():
                side[classes.rep(r)] = side.get(classes.rep(r), 0.0) + per_byte
            hbm = side
        merged: dict[str, tuple[Link, float]] = {}
        for link_id, kind, capacity, w in wires:
            merged[link_id] = ((merged[link_id][0], merged[link_id][1] + w) if link_id in merged
                               else (self.net.link(link_id, kind, capacity), w))
        found = self._uses[key] = (list(merged.values()), crosses, tuple(hbm.items()) or None)
        return found

    def _wires(self, srcs: tuple[int, ...], dsts: tuple[int, ...], mech: Mechanism,
               issuer: int, comm_sms: int) -> tuple[list[tuple[str, str, float, float]], bool]:
        """(link id, kind, capacity, capacity per payload byte) of each link a send crosses,
        and whether it crosses a NIC."""
        fabric, topo = self.fabric, self.topo
        if len(srcs) == 1 and len(dsts) == 1:
            ids = list(fabric.route(srcs[0], dsts[0]))
        else:  # through the switch: each source's port out, each destination's port in
            ids = [fabric.route(s, SWITCH)[0] for s in srcs]
            ids += [fabric.route(SWITCH, d)[0] for d in dsts]
        wires: list[tuple[str, str, float, float]] = []
        crosses = False
        for link_id in ids:
            wire = fabric.link(link_id)
            crosses = crosses or wire.kind in (NIC, UPLINK_NET)
            eff = link_efficiency(topo, mech, wire.kind)
            wires.append((link_id, wire.kind, wire.line_Bps, 1.0 / eff))
        if mech.traits.uses_sms and 0 < comm_sms < mech.sms_to_saturate:
            rate = topo.peer_line_rate_GBps * 1e9 * mech.efficiency * comm_sms \
                / mech.sms_to_saturate
            wires.append((f"gpu{issuer}.comm_sms", "sm_issue", rate, 1.0))
        return wires, crosses

    def _comm_hbm(self, flow: Flow, old: float, new: float) -> None:
        """Communication has first call on HBM (NVLink moves far less than HBM can): compute
        on a GPU gets its HBM bandwidth less the bytes communication reads and writes there."""
        now = self.env.now
        full = self.topo.gpu.hbm_Bps
        for rank, per_byte in flow.side:
            link = self.hbm_link(rank)
            link.wire_bytes += self._hbm_comm[rank] * (now - self._hbm_since[rank])
            self._hbm_since[rank] = now
            self._hbm_comm[rank] += (new - old) * per_byte
            self.net.set_capacity(link, max(full - self._hbm_comm[rank], 0.05 * full))

    def record_flow(self, flow: Flow) -> None:
        if self.options.trace:
            self.flows.append((flow.start, self.env.now, flow.tag, flow.nbytes))

    # ------------------------------------------------------------ running

    def run(self) -> float:
        """Run every node to its end; return the simulated time (seconds)."""
        for node in self.nodes:
            node._left = len(node.deps)
            for dep in node.deps:
                dep._dependents.append(node)
        # the roots are collected before any starts: a zero-time node ends at once and may
        # bring a later node's count to 0, which must then start once (by its dependency)
        roots = [node for node in self.nodes if node._left == 0]
        for node in roots:
            self._ready(node, None)
        collecting = gc.isenabled()
        gc.disable()  # millions of short-lived tuples: the cyclic collector only slows us down
        try:
            self.env.run()
        finally:
            if collecting:
                gc.enable()
        unfinished = [n for n in self.nodes if n.end is None]
        if unfinished:
            n = unfinished[0]
            raise InfeasibleError(f"simulation stalled: {len(unfinished)} node(s) never "
                                  f"ended, first rank {n.rank} {n.track} {n.name} (a link or "
                                  "mechanism with no capacity?)")
        for r in range(self.world_size):
            self.hold_sms(r, 0)
            self.comm_sm_seconds[r] += self._held[r] * (self.env.now - self._held_since[r])
        return float(self.env.now)

    def _ready(self, node: Node, cause: Node | None) -> None:
        node.ready = self.env.now
        node.cause = cause
        if node.launch_s > 0:
            ev = self.env.timeout(node.launch_s)
            ev.callbacks.append(lambda _e: self._start(node))
        else:
            self._start(node)

    def _start(self, node: Node) -> None:
        node.start = self.env.now
        if node.work is None:
            self._end(node)
        else:
            node.work.run(self, node, lambda: self._end(node))

    def _end(self, node: Node) -> None:
        node.end = self.env.now
        for child in node._dependents:
            child._left -= 1
            if child._left == 0:
                self._ready(child, node)
