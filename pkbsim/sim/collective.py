"""One collective call, run as every member's program of sends and receives over the network.

Each member enters when its stream reaches the call; after the mechanism's start latency its
programs (one per channel) run. A send starts only once every rank it touches has entered (a
peer's buffer is ready), moves its bytes as one fluid flow, and its data is usable at the
destination one step latency later (a flag exchange; the network latency when it crosses a NIC).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import simpy

from pkbsim.collectives.base import BATCH, RECV, SEND, WAITALL, Algorithm, Context, Prim, Shift
from pkbsim.sim.network import Flow, Link, Network
from pkbsim.symmetry import Classes
from pkbsim.topology.schema import Mechanism, Topology


class _Tracing(Protocol):
    @property
    def trace(self) -> bool: ...


class CallHost(Protocol):
    """What a call needs of the simulation it runs in (pkbsim.sim.engine.Simulation): the
    clock, the network, the machine, the GPUs' copy engines and the links a send uses."""

    env: simpy.Environment
    net: Network
    topo: Topology

    @property
    def options(self) -> _Tracing: ...

    def copy_engine(self, rank: int, start: Callable[[], None]) -> None: ...

    def copy_engine_done(self, rank: int) -> None: ...

    def uses(self, srcs: tuple[int, ...], dsts: tuple[int, ...], mech: Mechanism,
             issuer: int, comm_sms: int
             ) -> tuple[list[tuple[Link, float]], bool, tuple[tuple[int, float], ...] | None]:
        ...

    def record_flow(self, flow: Flow) -> None: ...


@dataclass(frozen=True)
class CallSpec:
    """How one call is carried out."""

    algorithm: Algorithm
    mechanism: Mechanism
    kind: str
    nbytes: float  # the buffer each rank hands to the call (nccl-tests' convention)
    ctx: Context
    chunks: int
    start_latency_s: float  # once per rank, before its programs start (launch, handshake)
    step_latency_s: float  # per message inside a node, before the receiver may use it
    net_latency_s: float  # per message that crosses a NIC
    comm_sms: int  # SMs the call's kernel holds on each rank (0: copy engine)
    label: str = ""  # op id, for records
    flow_cap_Bps: float = float("inf")  # most one send may move per second (NCCL's LL cap)


def queues_copies(spec: CallSpec, topo: Topology) -> bool:
    """Whether the call's sends queue for the issuing GPU's copy engines."""
    return spec.mechanism.name == "copy_engine" and topo.gpu.copy_engines > 0


class CallImages:
    """Where the members of one call that are not simulated stand: at their representative
    (pkbsim.symmetry), in the run of the group that holds it. Over the whole world the
    representative's tags are the algorithm's relabelling of the member's; over smaller groups,
    which the steps map onto each other in order, the representative has the member's group
    rank and its tags."""

    def __init__(self, classes: Classes, world: bool) -> None:
        self.classes = classes
        self.world = world
        self.where: dict[int, tuple[CollectiveRun, int]] = {}  # simulated rank -> its run
        self.unready = 0  # simulated members not yet started


class _Channel:
    __slots__ = ("it", "rank", "waiting")

    def __init__(self, rank: int, it: Iterator[Prim]) -> None:
        self.rank = rank
        self.it = it
        self.waiting = 0


class CollectiveRun:
    """One call across ``members`` (global ranks; group rank i is members[i])."""

    def __init__(self, sim: CallHost, spec: CallSpec, members: list[int],
                 images: CallImages | None = None) -> None:
        self.sim = sim
        self.spec = spec
        self.members = members
        self.images = images
        n = len(members)
        self.finishers: list[Callable[[], None] | None] = [None] * n  # per rank, set on entry
        self.nodes: list[Any] = [None] * n  # each member's node (for the critical path)
        self.ready = [False] * n
        self.entered_at: list[float | None] = [None] * n
        self._open = [0] * n
        self._arrived: set[Any] = set()
        self._waiters: dict[Any, list[_Channel]] = {}
        self._parked: dict[int, list[tuple[CollectiveRun, _Channel, tuple[Any, ...]]]] = {}
        self._all_ready = False
        # group rank -> (run, group rank, shift of its tags) where it is simulated
        self._image: dict[int, tuple[CollectiveRun, int, Shift | None]] = {}
        self._simulated: list[bool] | None = None
        if images is not None:
            classes = images.classes
            self._simulated = [classes.rep(r) == r for r in members]
            for g, r in enumerate(members):
                if self._simulated[g]:
                    images.where[r] = (self, g)
                    images.unready += 1
        # copies queue for the issuing GPU's copy engines (gpu.copy_engines of the topology)
        self._copies = queues_copies(spec, sim.topo)
        self._routes: dict[tuple[Any, ...], tuple[Any, float, tuple[Any, ...], Any]] = {}

    # ------------------------------------------------------------ entry

    def enter(self, rank: int) -> None:
        """Group rank ``rank`` has reached the call on its stream."""
        self.entered_at[rank] = self.sim.env.now
        delay = self.spec.start_latency_s
        if delay > 0:
            ev = self.sim.env.timeout(delay)
            ev.callbacks.append(lambda _e: self._start(rank))
        else:
            self._start(rank)

    def _start(self, rank: int) -> None:
        spec = self.spec
        self.ready[rank] = True
        if self.images is not None:
            self.images.unready -= 1
        channels = spec.algorithm.channels(spec.kind, spec.ctx) if spec.ctx.n > 1 else 1
        self._open[rank] = channels
        for c in range(channels):
            it = spec.algorithm.program(spec.kind, spec.nbytes, spec.ctx, rank, spec.chunks, c)
            self._advance(_Channel(rank, iter(it)))
        for run, ch, send in self._parked.pop(rank, []):
            run._send(ch, send)

    def _where(self, rank: int) -> tuple[CollectiveRun, int, Shift | None]:
        """The run and group rank that stand for group rank ``rank``, and the shift of its tags
        (None: the same tags)."""
        if self._simulated is None or self._simulated[rank]:
            return self, rank, None
        found = self._image.get(rank)
        if found is None:
            images = self.images
            assert images is not None
            member = self.members[rank]
            run, g = images.where[images.classes.rep(member)]
            shift = images.classes.to_rep(member) if images.world else None
            found = self._image[rank] = (run, g, shift)
        return found

    # ------------------------------------------------------------ programs

    def _advance(self, ch: _Channel) -> None:
        arrived = self._arrived
        for prim in ch.it:
            op = prim[0]
            if op == SEND:
                ch.waiting = 1
                self._try_send(ch, prim[1:])
                return
            if op == BATCH:
                ch.waiting = len(prim[1])
                for send in prim[1]:
                    self._try_send(ch, send)
                return
            if op == RECV:
                key = (prim[1], ch.rank)
                if key not in arrived:
                    ch.waiting = 1
                    self._waiters.setdefault(key, []).append(ch)
                    return
            elif op == WAITALL:
                missing = 0
                for tag in prim[1]:
                    key = (tag, ch.rank)
                    if key not in arrived:
                        missing += 1
                        self._waiters.setdefault(key, []).append(ch)
                if missing:
                    ch.waiting = missing
                    return
        self._open[ch.rank] -= 1
        if self._open[ch.rank] == 0:
            finisher = self.finishers[ch.rank]
            if finisher is not None:
                finisher()

    def _wake(self, ch: _Channel) -> None:
        ch.waiting -= 1
        if ch.waiting == 0:
            self._advance(ch)

    def _try_send(self, ch: _Channel, send: tuple[Any, ...]) -> None:
        """Copies first take one of the issuing GPU's copy engines, in program order."""
        if self._copies:
            self.sim.copy_engine(self.members[ch.rank], lambda: self._send(ch, send))
        else:
            self._send(ch, send)

    def _send(self, ch: _Channel, send: tuple[Any, ...]) -> None:
        srcs, dsts, nbytes, tag = send
        if not self._all_ready:
            for r in (*srcs, *dsts):
                run, g, _ = self._where(r)
                if not run.ready[g]:
                    run._parked.setdefault(g, []).append((self, ch, send))
                    return
            self._all_ready = (all(self.ready) if self.images is None
                               else self.images.unready == 0)
        route = self._routes.get((srcs, dsts, ch.rank))
        if route is None:
            members = self.members
            g_srcs = tuple(members[s] for s in srcs)
            g_dsts = tuple(members[d] for d in dsts)
            uses, crosses_nic, hbm = self.sim.uses(g_srcs, g_dsts, self.spec.mechanism,
                                                   members[ch.rank], self.spec.comm_sms)
            latency = self.spec.net_latency_s if crosses_nic else self.spec.step_latency_s
            route = self._routes[(srcs, dsts, ch.rank)] = (uses, latency, (g_srcs, g_dsts), hbm)
        issuer = self.members[ch.rank] if self._copies else -1
        done = _SendDone(self, ch, dsts, tag, route[1], issuer)
        self.sim.net.start(route[0], nbytes, done, cap=self.spec.flow_cap_Bps,
                           tag=(self.spec.label, *route[2]), side=route[3])

    def _arrive(self, dsts: tuple[int, ...], tag: Any) -> None:
        for d in dsts:
            if self._simulated is not None and not self._simulated[d]:
                run, g, shift = self._where(d)
                run._arrive((g,), tag if shift is None
                            else self.spec.algorithm.relabel(tag, shift))
                continue
            key = (tag, d)
            self._arrived.add(key)
            waiting = self._waiters.pop(key, None)
            if waiting:
                for ch in waiting:
                    self._wake(ch)


class _SendDone:
    __slots__ = ("ch", "dsts", "issuer", "latency", "run", "tag")

    def __init__(self, run: CollectiveRun, ch: _Channel, dsts: tuple[int, ...], tag: Any,
                 latency: float, issuer: int) -> None:
        self.run = run
        self.ch = ch
        self.dsts = dsts
        self.tag = tag
        self.latency = latency
        self.issuer = issuer  # the GPU whose copy engine carried it, or -1

    def __call__(self, flow: Flow) -> None:
        run = self.run
        if self.issuer >= 0:
            run.sim.copy_engine_done(self.issuer)
        if run.sim.options.trace:
            run.sim.record_flow(flow)
        if self.latency > 0:
            run.sim.net.call_later(self.latency, self._arrive, None)
        else:
            run._arrive(self.dsts, self.tag)
        run._wake(self.ch)

    def _arrive(self, _ev: object) -> None:
        self.run._arrive(self.dsts, self.tag)
