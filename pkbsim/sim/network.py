"""Links shared by fluid flows: max-min fair rates by progressive filling, on a simpy clock.

A flow moves ``nbytes`` of payload over a set of links; on each link it consumes ``weight`` bytes
of capacity per payload byte (1 / efficiency for a transfer mechanism; other units for the SM
and HBM links of a GPU). Flows that share links get weighted max-min fair payload rates (as
SimGrid's linear max-min model): every flow of a connected set gets the same payload rate unless
a link it crosses saturates first or its own cap (``cap_Bps``) binds. In the allocation every
flow has a bottleneck: its cap, or a saturated link on which no flow is faster.

Whenever flows start or finish (or a link's capacity changes), the rates are brought up to date
once per instant, incrementally. Each flow remembers its bottleneck links. The region solved
again is the links the new flows cross and those whose flows or capacity changed; a flow is
freed (solved for) if it is new, if its bottleneck was in the region (it may speed up), or if
it shares a newcomer's link that was already full (it must make room); every other flow on
the region's links takes part pinned at its current rate, as if capped there. A pinned flow
that a link would freeze lower, or that no bottleneck binds any more, is freed in turn and the
region solved again, until every pinned flow is right. The outcome is the max-min allocation
of every connected set, as solving it from scratch (``_max_min``, kept as the reference) gives
it, at a cost that follows the flows around the change rather than the whole set (solving the
whole set at every update made a pipelined tree all-reduce cost about flows^1.6).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from operator import attrgetter
from typing import Any

import simpy

from pkbsim.errors import InfeasibleError
from pkbsim.limits import SIM_FLOWS
from pkbsim.sim.resident import WATCH_FLOWS, watch

_EPS = 1e-12
_TOL = 1 + 1e-9  # levels this close freeze together (as one level, the lower)
_INF = float("inf")
_CAP = attrgetter("_cap")


class Link:
    __slots__ = ("_full", "_left", "_mark", "_seen", "_spare", "_weight", "capacity", "flows",
                 "id", "kind", "wire_bytes", "zero_weight")

    def __init__(self, link_id: str, kind: str, capacity: float) -> None:
        self.id = link_id
        self.kind = kind
        self.capacity = capacity  # units per second (bytes/s for data links)
        self.flows: dict[int, Flow] = {}  # insertion order keeps runs deterministic
        self.wire_bytes = 0.0  # capacity units consumed so far (integral of usage)
        self.zero_weight = 0  # flows on it with weight <= 0 (they take no capacity)
        # solver scratch: in the region of flush _mark, looked at for room in flush _full, in
        # the group of pass _seen
        self._mark = 0
        self._full = 0
        self._seen = 0
        self._spare = 0.0
        self._weight = 0.0
        self._left = 0


class Flow:
    __slots__ = ("_cap", "_done", "_free", "_new", "_seen", "_via", "_via2", "bneck", "bneck2",
                 "cap", "finished", "id", "nbytes", "on_done", "rate", "remaining", "side",
                 "start", "tag", "updated", "uses", "version")

    def __init__(self, flow_id: int, uses: list[tuple[Link, float]], nbytes: float,
                 cap: float, on_done: Callable[[Flow], None], now: float, tag: Any) -> None:
        self.id = flow_id
        self.uses = uses
        self.nbytes = nbytes
        self.remaining = nbytes  # as of ``updated`` (settled when the rate changes)
        self.cap = cap
        self.on_done = on_done
        self.rate = 0.0
        self.updated = now
        self.start = now
        self.version = 0
        self.tag = tag
        self.finished = False
        self.side: Any = None  # a side effect of the rate (Network.on_rate), e.g. HBM traffic
        # saturated links (up to two) on which no flow is faster: what sets its rate (None,
        # None: its cap)
        self.bneck: Link | None = None
        self.bneck2: Link | None = None
        # solver scratch: freed in flush _free, in the group of pass _seen, frozen in round _done
        self._free = 0
        self._seen = 0
        self._done = 0
        self._new = 0.0  # its rate in the region's solution
        self._cap = _INF  # its cap in this pass (a pinned flow's: its current rate)
        self._via: Link | None = None  # the links that froze it in this pass
        self._via2: Link | None = None


class FlowBudget:
    """The transfers (SIM_FLOWS) the simulations of one prediction may start together: each
    run (custom_best tries several piece counts) and each call it simulates alone to choose
    an op's algorithm draws on it."""

    def __init__(self) -> None:
        self.limit = SIM_FLOWS.value
        self.started = 0
        self.next = min(self.limit, WATCH_FLOWS)  # the next count to stop at and look

    def over(self) -> None:
        """Past ``next``: refuse past SIM_FLOWS; else read the memory (SIM_MEMORY)."""
        if self.started > self.limit:
            raise SIM_FLOWS.exceeded(self.started, "transfers", InfeasibleError)
        watch()
        self.next = min(self.limit, self.started + WATCH_FLOWS)


class Network:
    """All links of one simulation and the flows on them."""

    def __init__(self, env: simpy.Environment, budget: FlowBudget | None = None) -> None:
        self.env = env
        self.budget = budget or FlowBudget()
        self.links: dict[str, Link] = {}
        self._next = 0
        self._dirty: dict[int, Flow] = {}
        self._dirty_links: dict[str, Link] = {}
        self._flush_pending = False
        self._stamp = 0  # flushes and solver passes so far (scratch marks compare against it)
        self._round = 0  # progressive-filling rounds so far
        self.flows_started = 0
        self.rate_updates = 0
        self.solver_flows = 0  # flows taking part in solver passes (free or pinned), a cost
        self._buckets: dict[float, list[tuple[Callable[[Any], None], Any]]] = {}
        # called as on_rate(flow, old_rate, new_rate) for flows with a ``side``, after the fact
        self.on_rate: Callable[[Flow, float, float], None] | None = None

    def call_later(self, delay: float, fn: Callable[[Any], None], arg: Any) -> None:
        """Run ``fn(arg)`` ``delay`` seconds from now. Calls due at the same instant share one
        simpy event (in lockstep collectives thousands are), and run in the order made."""
        t = self.env.now + delay
        bucket = self._buckets.get(t)
        if bucket is None:
            bucket = self._buckets[t] = []
            self.env.timeout(delay, t).callbacks.append(self._run_bucket)
        bucket.append((fn, arg))

    def _run_bucket(self, ev: Any) -> None:
        for fn, arg in self._buckets.pop(ev.value):
            fn(arg)

    def link(self, link_id: str, kind: str, capacity: float) -> Link:
        found = self.links.get(link_id)
        if found is None:
            found = self.links[link_id] = Link(link_id, kind, capacity)
        return found

    def start(self, uses: list[tuple[Link, float]], nbytes: float,
              on_done: Callable[[Flow], None], cap: float = _INF, tag: Any = None,
              side: Any = None) -> Flow:
        """Begin moving ``nbytes``; ``on_done(flow)`` runs when the last byte is through."""
        self._next += 1
        flow = Flow(self._next, uses, nbytes, cap, on_done, self.env.now, tag)
        flow.side = side
        self.flows_started += 1
        budget = self.budget
        budget.started += 1
        if budget.started > budget.next:  # SIM_FLOWS, or time to look at the memory
            budget.over()
        if nbytes <= 0 or not uses:
            self.call_later(0.0, on_done, flow)
            return flow
        alone = True
        for link, w in uses:
            if link.flows:
                alone = False
            link.flows[flow.id] = flow
            if w <= 0:
                link.zero_weight += 1
        if alone:  # nothing to share with (yet): its rate is set now
            rate = cap
            for link, w in uses:
                if w > 0 and link.capacity < rate * w:
                    rate = link.capacity / w
            if rate < cap:
                bound = rate * _TOL + _EPS
                for link, w in uses:
                    if w > 0 and link.capacity / w <= bound:
                        if flow.bneck is None:
                            flow.bneck = link
                        elif flow.bneck2 is None:
                            flow.bneck2 = link
            flow.rate = rate
            flow.version = 1
            self.rate_updates += 1
            if side is not None and self.on_rate is not None:
                self.on_rate(flow, 0.0, rate)
            if rate > 0:
                self.call_later(nbytes / rate, self._on_timeout, (flow, 1))
        else:
            self._dirty[flow.id] = flow
            self._schedule_flush()
        return flow

    def set_capacity(self, link: Link, capacity: float) -> None:
        """Change a link's capacity now (e.g. SMs taken by a communication kernel)."""
        if capacity == link.capacity:
            return
        link.capacity = capacity
        if link.flows:  # what they moved so far is settled when (if) their rates change
            self._dirty_links[link.id] = link
            self._schedule_flush()

    # ------------------------------------------------------------ internals

    def _schedule_flush(self) -> None:
        if not self._flush_pending:
            self._flush_pending = True
            ev = self.env.timeout(0)
            ev.callbacks.append(self._flush)

    def _flush(self, _ev: object = None) -> None:
        """Bring the rates up to date after this instant's starts, finishes and capacity
        changes (see the module's docstring): free the flows whose rate may change, solve the
        region around them with the other flows pinned, free the pinned flows found wrong and
        solve again, until none is; then give the freed flows their rates."""
        self._flush_pending = False
        self._stamp += 1
        flush = self._stamp
        free: list[Flow] = []
        seeds: list[Flow | Link] = []

        def release(f: Flow) -> None:
            f._free = flush
            free.append(f)
            seeds.append(f)
            for link, w in f.uses:
                if w > 0:
                    link._mark = flush

        for f in self._dirty.values():
            if not f.finished and f.uses:
                release(f)
        for f in list(free):  # a link already full: its flows make room for the newcomer
            for link, w in f.uses:
                if w > 0 and link._full != flush:
                    link._full = flush  # (looked at)
                    if _full(link, flush):
                        for other in link.flows.values():
                            if other._free != flush:
                                release(other)
        changed = list(self._dirty_links.values())
        self._dirty.clear()
        self._dirty_links.clear()
        for link in changed:
            link._mark = flush
        for link in changed:  # the flows it bound may speed up; an overfull link must be solved
            if _unbound(link, flush, release):
                seeds.append(link)
        while seeds:
            self._stamp += 1
            wrong: list[Flow] = []
            for seed in seeds:
                if seed._seen != self._stamp:
                    self._solve(seed, flush, wrong)
            seeds = []
            for f in wrong:
                release(f)
        self._assign(free)

    def _solve(self, seed: Flow | Link, flush: int, wrong: list[Flow]) -> None:
        """Progressive filling over the region connected to ``seed`` (a flow or a link of the
        region): its links are those a free flow crosses and those whose flows or capacity
        changed, its flows every flow on them. The free flows get their rates (``_new``); a
        pinned flow takes part as a flow capped at its current rate, and goes to ``wrong``
        when a link would freeze it lower, or when none of its bottlenecks binds it any more
        (those in the region did not saturate where it stopped)."""
        stamp = self._stamp
        flows: list[Flow] = []
        links: list[Link] = []

        def enter(link: Link) -> None:
            """Add ``link`` to the region, its sums reset, and its flows not seen yet."""
            link._seen = stamp
            link._spare = link.capacity
            link._weight = 0.0
            link._left = 0
            links.append(link)
            for other in link.flows.values():
                if other._seen != stamp:
                    other._seen = stamp
                    flows.append(other)

        if isinstance(seed, Link):
            enter(seed)
        else:
            seed._seen = stamp
            flows.append(seed)
        capped: list[Flow] = []
        i = 0
        while i < len(flows):  # the region, breadth first, and each link's weight sum
            f = flows[i]
            i += 1
            for link, w in f.uses:
                if w > 0 and link._mark == flush:
                    if link._seen != stamp:
                        enter(link)
                    link._weight += w
                    link._left += 1
            cap = f.cap
            if f._free != flush and f.rate < cap:
                cap = f.rate
            f._cap = cap
            if cap < _INF:
                capped.append(f)
        self.solver_flows += len(flows)
        if len(capped) > 1:
            capped.sort(key=_CAP)  # ties keep the region's order
        ci = 0
        left = len(flows)
        first = self._round  # rounds after this one are this solve's
        active = [link for link in links if link._left]
        while left:
            level = _INF
            ratios = []
            for link in active:
                spare = link._spare
                ratio = (spare if spare > 0.0 else 0.0) / link._weight
                ratios.append(ratio)
                if ratio < level:
                    level = ratio
            while ci < len(capped) and capped[ci]._done > first:
                ci += 1
            if ci < len(capped) and capped[ci]._cap < level:
                level = capped[ci]._cap
            if level == _INF:  # no constraint at all (weights 0, no cap)
                level = 0.0
            bound = level * _TOL + _EPS
            self._round += 1
            rnd = self._round
            frozen: list[Flow] = []
            for link, ratio in zip(active, ratios, strict=True):
                if ratio <= bound:
                    for f in link.flows.values():
                        if f._done <= first:
                            if not link.zero_weight or _crosses(f, link):
                                f._done = rnd
                                f._via = link
                                f._via2 = None
                                frozen.append(f)
                        elif f._done == rnd and f._via2 is None and f._via is not link and (
                                not link.zero_weight or _crosses(f, link)):
                            f._via2 = link
            for k in range(ci, len(capped)):
                f = capped[k]
                if f._cap > bound:
                    break
                if f._done <= first:
                    f._done = rnd
                    f._via = f._via2 = None
                    frozen.append(f)
            if not frozen:
                for f in flows:
                    if f._done <= first:
                        f._done = rnd
                        f._via = f._via2 = None
                        frozen.append(f)
            left -= len(frozen)
            for f in frozen:
                if f._free == flush:
                    rate = f._new = level
                    f.bneck = f._via
                    f.bneck2 = f._via2
                elif f._cap > bound:  # a link holds it below its rate: it must slow down
                    rate = level
                    wrong.append(f)
                else:  # its own rate, reached: right if a link froze it here, if its cap
                    rate = f.rate  # binds, or if a bottleneck of it is outside the region
                    if f._via is not None:
                        f.bneck = f._via
                        f.bneck2 = f._via2
                    elif f.cap <= bound:
                        f.bneck = f.bneck2 = None
                    else:  # none of its links in the region binds it: keep those outside
                        b1, b2 = f.bneck, f.bneck2
                        if b2 is not None and b2._mark == flush:
                            b2 = None
                        if b1 is None or b1._mark == flush:
                            b1, b2 = b2, None
                        if b1 is None:
                            wrong.append(f)  # its bottleneck has room now: it may speed up
                        f.bneck, f.bneck2 = b1, b2
                if left:  # (after the last round nothing reads the links)
                    for link, w in f.uses:
                        if w > 0 and link._seen == stamp:
                            link._spare -= rate * w
                            link._weight -= w
                            link._left -= 1
            if left:
                active = [link for link in active if link._left]

    def _assign(self, flows: Iterable[Flow]) -> None:
        """Give the freed flows their new rates: what they moved at the old rate is settled,
        and each rate change schedules the flow's finish anew."""
        now = self.env.now
        for f in flows:
            rate = f._new
            if rate == f.rate and f.version > 0:
                continue
            if f.rate > 0 and now > f.updated:
                moved = f.rate * (now - f.updated)
                f.remaining = max(0.0, f.remaining - moved)
                for link, w in f.uses:
                    link.wire_bytes += moved * w
            f.updated = now
            if f.side is not None and self.on_rate is not None:
                self.on_rate(f, f.rate, rate)
            f.rate = rate
            f.version += 1
            self.rate_updates += 1
            if rate <= 0:
                continue  # starved until another flow leaves
            self.call_later(f.remaining / rate, self._on_timeout, (f, f.version))

    def _on_timeout(self, due: tuple[Flow, int]) -> None:
        flow, version = due
        if flow.version == version and not flow.finished:
            self._finish(flow)

    def _finish(self, flow: Flow) -> None:
        now = self.env.now
        moved = flow.remaining if flow.rate > 0 else 0.0
        for link, w in flow.uses:
            link.wire_bytes += moved * w
            del link.flows[flow.id]
            if w <= 0:
                link.zero_weight -= 1
            if link.flows:
                self._dirty_links[link.id] = link
        if flow.side is not None and self.on_rate is not None:
            self.on_rate(flow, flow.rate, 0.0)
        flow.remaining = 0.0
        flow.rate = 0.0
        flow.updated = now
        flow.finished = True
        if self._dirty_links:
            self._schedule_flush()
        flow.on_done(flow)


def _full(link: Link, flush: int) -> bool:
    """Whether the flows on a link, but the free ones, already use all of its capacity (then
    the link's share of a newcomer comes out of theirs)."""
    used = 0.0
    for f in link.flows.values():
        if f._free != flush:
            for lk, w in f.uses:
                if lk is link and w > 0:
                    used += f.rate * w
    return used * _TOL + _EPS >= link.capacity


def _unbound(link: Link, flush: int, release: Callable[[Flow], None]) -> bool:
    """After a link's flows or capacity changed: free (``release``) each pinned flow on it
    that has no bottleneck left outside this flush's region (nor its cap), as it may speed
    up; the others keep only the bottlenecks outside the region. Returns whether the link
    must be solved anyway: its pinned flows no longer fit in its capacity."""
    used = 0.0
    for f in link.flows.values():
        if f._free == flush:
            continue
        if f.rate < f.cap:
            b1, b2 = f.bneck, f.bneck2
            if b2 is not None and b2._mark == flush:
                b2 = None
            if b1 is None or b1._mark == flush:
                b1, b2 = b2, None
            if b1 is None:
                release(f)
                continue
            f.bneck, f.bneck2 = b1, b2
        for lk, w in f.uses:
            if lk is link and w > 0:
                used += f.rate * w
    return used > link.capacity


def _crosses(f: Flow, link: Link) -> bool:
    """Whether ``f`` takes capacity on ``link`` (a flow may cross a link with weight 0)."""
    return any(lk is link and w > 0 for lk, w in f.uses)


def _max_min(flows: list[Flow]) -> dict[int, float]:
    """Weighted max-min fair payload rates of a connected set of flows by progressive filling
    from scratch: the solver as it was before the incremental update, the reference the tests
    hold it to (tests/sim/test_sim_network_incremental.py).

    Each round raises every unfrozen flow to the level at which the first link saturates (or
    the first cap binds), then freezes the flows on that link; per-link weight sums are kept
    up to date as flows freeze, so a round costs the links plus the flows it freezes.
    """
    if len(flows) == 1:
        f = flows[0]
        rate = f.cap
        for link, w in f.uses:
            if w > 0:
                rate = min(rate, link.capacity / w)
        return {f.id: max(rate, 0.0)}
    rates: dict[int, float] = {}
    active: dict[int, Flow] = {f.id: f for f in flows}
    spare: dict[str, float] = {}
    weight: dict[str, float] = {}
    on: dict[str, list[Flow]] = {}
    left: dict[str, int] = {}  # unfrozen flows per link: a float weight sum never quite drains
    for f in flows:
        for link, w in f.uses:
            if w <= 0:
                continue
            if link.id not in spare:
                spare[link.id] = link.capacity
                weight[link.id] = 0.0
                on[link.id] = []
                left[link.id] = 0
            weight[link.id] += w
            left[link.id] += 1
            on[link.id].append(f)
    capped = sorted((f for f in flows if f.cap < float("inf")), key=lambda f: (f.cap, f.id))
    while active:
        level = float("inf")
        for lid, wsum in weight.items():
            if left[lid]:
                level = min(level, max(spare[lid], 0.0) / wsum)
        while capped and capped[0].id not in active:
            capped.pop(0)
        if capped:
            level = min(level, capped[0].cap)
        if level == float("inf"):  # no constraint at all (weights 0, no cap)
            level = 0.0
        bound = level * (1 + 1e-9) + _EPS
        frozen: dict[int, Flow] = {}
        for lid, wsum in weight.items():
            if left[lid] and max(spare[lid], 0.0) / wsum <= bound:
                for f in on[lid]:
                    if f.id in active:
                        frozen[f.id] = f
        for f in capped:
            if f.cap > bound:
                break
            if f.id in active:
                frozen[f.id] = f
        if not frozen:
            frozen = dict(active)
        for f in frozen.values():
            rates[f.id] = level
            del active[f.id]
            for link, w in f.uses:
                if w > 0:
                    spare[link.id] -= level * w
                    weight[link.id] -= w
                    left[link.id] -= 1
    return rates
