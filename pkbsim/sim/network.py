"""Links shared by fluid flows: max-min fair rates by progressive filling, on a simpy clock.

A flow moves ``nbytes`` of payload over a set of links; on each link it consumes ``weight`` bytes
of capacity per payload byte (1 / efficiency for a transfer mechanism; other units for the SM
and HBM links of a GPU). Whenever flows start or finish, the rates of the flows they share links
with (their connected component) are recomputed together, once per instant: every flow in a
component gets the same payload rate unless a link it crosses saturates first or its own cap
(``cap_Bps``) binds (weighted max-min fairness, as SimGrid's linear max-min model).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import simpy

from pkbsim.errors import InfeasibleError
from pkbsim.limits import SIM_FLOWS

_EPS = 1e-12


class Link:
    __slots__ = ("capacity", "flows", "id", "kind", "wire_bytes")

    def __init__(self, link_id: str, kind: str, capacity: float) -> None:
        self.id = link_id
        self.kind = kind
        self.capacity = capacity  # units per second (bytes/s for data links)
        self.flows: dict[int, Flow] = {}  # insertion order keeps runs deterministic
        self.wire_bytes = 0.0  # capacity units consumed so far (integral of usage)


class Flow:
    __slots__ = ("cap", "finished", "id", "nbytes", "on_done", "rate", "remaining", "side",
                 "start", "tag", "updated", "uses", "version")

    def __init__(self, flow_id: int, uses: list[tuple[Link, float]], nbytes: float,
                 cap: float, on_done: Callable[[Flow], None], now: float, tag: Any) -> None:
        self.id = flow_id
        self.uses = uses
        self.nbytes = nbytes
        self.remaining = nbytes
        self.cap = cap
        self.on_done = on_done
        self.rate = 0.0
        self.updated = now
        self.start = now
        self.version = 0
        self.tag = tag
        self.finished = False
        self.side: Any = None  # a side effect of the rate (Network.on_rate), e.g. HBM traffic


class Network:
    """All links of one simulation and the flows on them."""

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self.links: dict[str, Link] = {}
        self._next = 0
        self._dirty: dict[int, Flow] = {}
        self._dirty_links: dict[str, Link] = {}
        self._flush_pending = False
        self.flows_started = 0
        self.max_flows = SIM_FLOWS.value
        self.rate_updates = 0
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
              on_done: Callable[[Flow], None], cap: float = float("inf"), tag: Any = None,
              side: Any = None) -> Flow:
        """Begin moving ``nbytes``; ``on_done(flow)`` runs when the last byte is through."""
        self._next += 1
        flow = Flow(self._next, uses, nbytes, cap, on_done, self.env.now, tag)
        flow.side = side
        self.flows_started += 1
        if self.flows_started > self.max_flows:
            raise SIM_FLOWS.exceeded(self.flows_started, "transfers", InfeasibleError)
        if nbytes <= 0 or not uses:
            self.call_later(0.0, on_done, flow)
            return flow
        alone = True
        for link, _w in uses:
            if link.flows:
                alone = False
            link.flows[flow.id] = flow
        if alone:  # nothing to share with (yet): its rate is set now
            rate = cap
            for link, w in uses:
                if w > 0 and link.capacity < rate * w:
                    rate = link.capacity / w
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
        if not link.flows:
            link.capacity = capacity
            return
        self._settle(link.flows.values())
        link.capacity = capacity
        self._dirty_links[link.id] = link
        self._schedule_flush()

    # ------------------------------------------------------------ internals

    def _schedule_flush(self) -> None:
        if not self._flush_pending:
            self._flush_pending = True
            ev = self.env.timeout(0)
            ev.callbacks.append(self._flush)

    def _flush(self, _ev: object = None) -> None:
        self._flush_pending = False
        seeds = list(self._dirty.values())
        for link in self._dirty_links.values():
            seeds.extend(link.flows.values())
        self._dirty.clear()
        self._dirty_links.clear()
        seen: dict[int, Flow] = {}
        for seed in seeds:
            if seed.id in seen or seed.finished or not seed.uses:
                continue
            component = self._component(seed)
            seen.update((f.id, f) for f in component)
            self._settle(component)
            self._assign(component)

    def _component(self, seed: Flow) -> list[Flow]:
        uses = seed.uses
        if len(uses) <= 2 and all(len(link.flows) == 1 for link, _ in uses):
            return [seed]  # alone on its links: the common case
        found: dict[int, Flow] = {seed.id: seed}
        visited: set[str] = set()
        stack = [seed]
        while stack:
            flow = stack.pop()
            for link, _w in flow.uses:
                if link.id in visited:
                    continue
                visited.add(link.id)
                for other in link.flows.values():
                    if other.id not in found:
                        found[other.id] = other
                        stack.append(other)
        return list(found.values())

    def _settle(self, flows: Any) -> None:
        now = self.env.now
        for f in flows:
            if f.rate > 0 and now > f.updated:
                moved = f.rate * (now - f.updated)
                f.remaining = max(0.0, f.remaining - moved)
                for link, w in f.uses:
                    link.wire_bytes += moved * w
            f.updated = now

    def _assign(self, flows: list[Flow]) -> None:
        rates = _max_min(flows)
        for f in flows:
            rate = rates[f.id]
            if rate == f.rate and f.version > 0:
                continue
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


def _max_min(flows: list[Flow]) -> dict[int, float]:
    """Weighted max-min fair payload rates by progressive filling.

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
