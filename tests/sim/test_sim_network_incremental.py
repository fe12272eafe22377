"""The network's incremental max-min update against a from-scratch solve.

After every start, finish or capacity change the network solves only the region that changed,
with the flows around it pinned at their rates (pkbsim/sim/network.py). Whatever happened
before, the rates must then be the max-min allocation of every connected set of flows, as
``_max_min`` (progressive filling from scratch) gives it, and the finish times those of a
network that solves every touched connected set from scratch.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
import simpy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pkbsim.sim.network import Flow, Link, Network, _max_min

MECHANISM_WEIGHTS = [1 / 0.69, 1 / 0.78, 1 / 0.82, 1 / 0.94, 1.0, 1.25, 2.0]
INF = float("inf")


def components(flows: list[Flow]) -> list[list[Flow]]:
    """The connected sets of ``flows`` (flows sharing a link, transitively)."""
    seen: set[int] = set()
    out = []
    for f in flows:
        if f.id in seen:
            continue
        seen.add(f.id)
        comp, stack = [], [f]
        while stack:
            g = stack.pop()
            comp.append(g)
            for link, _w in g.uses:
                for h in link.flows.values():
                    if h.id not in seen:
                        seen.add(h.id)
                        stack.append(h)
        out.append(comp)
    return out


def active(net: Network) -> list[Flow]:
    return list({f.id: f for link in net.links.values() for f in link.flows.values()}.values())


def assert_max_min(net: Network) -> None:
    """Every active flow has the rate progressive filling from scratch gives its connected
    set, and no link carries more than its capacity."""
    for comp in components(active(net)):
        expected = _max_min(comp)
        for f in comp:
            assert f.rate == pytest.approx(expected[f.id], rel=1e-9, abs=1e-9), (
                f"t={net.env.now}: flow {f.id} at {f.rate}, from scratch {expected[f.id]} "
                f"({len(comp)} flows)")
    for link in net.links.values():
        used = sum(f.rate * w for f in link.flows.values() for lk, w in f.uses
                   if lk is link and w > 0)
        assert used <= link.capacity * (1 + 1e-9) + 1e-9


class Checked(Network):
    """The incremental network, checked against ``_max_min`` after every update."""

    def _flush(self, _ev: object = None) -> None:
        super()._flush(_ev)
        assert_max_min(self)


class FromScratch(Network):
    """The solver as it was before the incremental update: each update solves every touched
    connected set from scratch (``_max_min``), all of its flows free."""

    def _flush(self, _ev: object = None) -> None:
        self._flush_pending = False
        seeds = list(self._dirty.values())
        for link in self._dirty_links.values():
            seeds.extend(link.flows.values())
        self._dirty.clear()
        self._dirty_links.clear()
        seen: set[int] = set()
        for seed in seeds:
            if seed.id in seen or seed.finished or not seed.uses:
                continue
            comp = components([seed])[0]
            seen.update(f.id for f in comp)
            rates = _max_min(comp)
            for f in comp:
                f._new = rates[f.id]
            self._assign(comp)


# a scenario: links (capacities), flows (start, link indices and weights, bytes, cap) and
# capacity changes (time, link index, capacity)
Scenario = tuple[list[float], list[tuple[float, list[tuple[int, float]], float, float]],
                 list[tuple[float, int, float]]]


@st.composite
def scenarios(draw: Any) -> Scenario:
    n_links = draw(st.integers(1, 7))
    capacities = draw(st.lists(st.sampled_from([100.0, 50.0, 450.0, 132.0, 10.0]),
                               min_size=n_links, max_size=n_links))
    times = st.sampled_from([0.0, 0.0, 0.5, 1.0, 2.5]) | st.floats(0.0, 6.0)
    flows = []
    for _ in range(draw(st.integers(1, 40))):
        chosen = draw(st.lists(st.integers(0, n_links - 1), min_size=1,
                               max_size=min(3, n_links), unique=True))
        uses = [(i, draw(st.sampled_from(MECHANISM_WEIGHTS))) for i in chosen]
        cap = draw(st.sampled_from([INF, INF, INF, 30.0, 7.5]))
        flows.append((draw(times), uses, draw(st.floats(1.0, 500.0)), cap))
    changes = [(draw(times), draw(st.integers(0, n_links - 1)),
                draw(st.sampled_from([0.0, 10.0, 100.0, 300.0])))
               for _ in range(draw(st.integers(0, 4)))]
    return capacities, flows, changes


def run(scenario: Scenario, cls: type[Network]) -> tuple[dict[int, float], Network]:
    capacities, flows, changes = scenario
    env = simpy.Environment()
    net = cls(env)
    links = [net.link(f"l{i}", "x", c) for i, c in enumerate(capacities)]
    done: dict[int, float] = {}

    def start(k: int) -> None:
        _t, uses, nbytes, cap = flows[k]
        net.start([(links[i], w) for i, w in uses], nbytes,
                  lambda _f: done.__setitem__(k, env.now), cap=cap)

    for k, (t, *_rest) in enumerate(flows):
        net.call_later(t, start, k)
    for t, i, capacity in changes:
        net.call_later(t, lambda c, link=links[i]: net.set_capacity(link, c), capacity)
    # every link back to some capacity at the end, so that nothing starves forever
    net.call_later(8.0, lambda _a: [net.set_capacity(lk, 100.0) for lk in links
                                    if lk.capacity == 0.0], None)
    env.run()
    return done, net


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_incremental_rates_are_the_max_min_of_every_connected_set(scenario: Scenario) -> None:
    done, net = run(scenario, Checked)
    assert len(done) == len(scenario[1])
    assert not active(net)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_incremental_finish_times_are_those_of_solving_from_scratch(scenario: Scenario
                                                                   ) -> None:
    got, net = run(scenario, Network)
    expected, ref = run(scenario, FromScratch)
    assert got.keys() == expected.keys()
    for k in expected:
        assert got[k] == pytest.approx(expected[k], rel=1e-9, abs=1e-12), k
    for name, link in net.links.items():
        assert link.wire_bytes == pytest.approx(ref.links[name].wire_bytes, rel=1e-9, abs=1e-9)


def random_scenario(seed: int) -> Scenario:
    """Up to 60 flows over up to 8 links, starting at a few shared instants or anywhere in
    [0, 5], and up to 4 capacity changes."""
    rnd = random.Random(seed)
    n_links = rnd.randint(2, 8)
    capacities = [rnd.choice([100.0, 50.0, 450.0, 132.0]) for _ in range(n_links)]
    flows = []
    for _ in range(rnd.randint(5, 60)):
        chosen = rnd.sample(range(n_links), rnd.randint(1, min(3, n_links)))
        uses = [(i, rnd.choice([1.0, 1.25, 2.0, 1 / 0.78])) for i in chosen]
        cap = rnd.choice([INF] * 3 + [30.0])
        t = rnd.choice([0.0, 0.5, 1.0, rnd.uniform(0.0, 5.0)])
        flows.append((t, uses, rnd.uniform(1.0, 500.0), cap))
    changes = [(rnd.uniform(0.0, 5.0), rnd.randrange(n_links), rnd.choice([10.0, 100.0, 300.0]))
               for _ in range(rnd.randint(0, 4))]
    return capacities, flows, changes


@pytest.mark.parametrize("block", range(2))
def test_incremental_rates_on_random_runs(block: int) -> None:
    """As above, on 200 seeded runs with more flows per link (seed 0 once caught a flow kept
    pinned by a bottleneck that had stopped binding it)."""
    for seed in range(block * 100, block * 100 + 100):
        scenario = random_scenario(seed)
        done, _net = run(scenario, Checked)
        assert len(done) == len(scenario[1])


def setup() -> tuple[simpy.Environment, Network, dict[str, float]]:
    env = simpy.Environment()
    net = Checked(env)
    return env, net, {}


def start_at(net: Network, t: float, uses: list[tuple[Link, float]], nbytes: float,
             label: str, done: dict[str, float], cap: float = INF) -> None:
    net.call_later(t, lambda _a: net.start(uses, nbytes, lambda _f: done.__setitem__(
        label, net.env.now), cap=cap), None)


def test_a_newcomer_slows_the_pinned_flows_it_joins() -> None:
    """a runs alone at 100 B/s on l; b joins at t = 1: a (pinned at 100) must drop to 50."""
    env, net, done = setup()
    link = net.link("l", "x", 100.0)
    start_at(net, 0.0, [(link, 1.0)], 200.0, "a", done)
    start_at(net, 1.0, [(link, 1.0)], 100.0, "b", done)
    env.run()
    # a: 100 B by t = 1, then 50 B/s with b until b is done at t = 3, then its last 0 B
    assert done == pytest.approx({"a": 3.0, "b": 3.0}, rel=1e-12)


def test_a_flow_speeds_up_when_its_only_bottleneck_frees() -> None:
    """f crosses A and B (10 units/s each), sharing A with g and B with h: 5 B/s each, f
    bound by both. g leaves at t = 2: f is still bound by B (h), so nothing changes. h leaves
    at t = 6: f must take the whole of both links (its bottlenecks were A and B; A was dropped
    when it stopped binding, and B no longer binds either)."""
    env, net, done = setup()
    a, b = net.link("A", "x", 10.0), net.link("B", "x", 10.0)
    start_at(net, 0.0, [(a, 1.0), (b, 1.0)], 100.0, "f", done)
    start_at(net, 0.0, [(a, 1.0)], 10.0, "g", done)
    start_at(net, 0.0, [(b, 1.0)], 30.0, "h", done)
    env.run()
    # f: 10 B by t = 2, 20 more at 5 B/s by t = 6, its last 70 B at 10 B/s: t = 13
    assert done == pytest.approx({"g": 2.0, "h": 6.0, "f": 13.0}, rel=1e-12)


def test_a_finish_that_binds_nobody_solves_nothing() -> None:
    """Eight flows out of one port into eight others, each bound by its own 10 B/s input;
    the shared output has room to spare. One finishing changes no rate: no solve at all."""
    env, net, done = setup()
    out = net.link("out", "x", 1000.0)
    ins = [net.link(f"in{i}", "x", 10.0) for i in range(8)]
    for i, link in enumerate(ins):
        net.start([(out, 1.0), (link, 1.0)], 100.0 if i else 10.0,
                  lambda _f, i=i: done.__setitem__(str(i), env.now))
    env.run(until=0.5)
    assert {f.rate for f in out.flows.values()} == {10.0}
    solved, updates = net.solver_flows, net.rate_updates
    env.run(until=1.5)  # flow 0 finished at t = 1
    assert done == {"0": 1.0}
    assert (net.solver_flows, net.rate_updates) == (solved, updates)
    env.run()
    assert done == pytest.approx({str(i): 1.0 if i == 0 else 10.0 for i in range(8)})


def test_a_capacity_cut_below_the_load_slows_flows_bound_elsewhere() -> None:
    """Two flows bound by their own 10 B/s links cross a 100 B/s link that drops to 10: they
    must share it (5 B/s each) though neither was bound by it."""
    env, net, done = setup()
    shared = net.link("s", "x", 100.0)
    own = [net.link(f"o{i}", "x", 10.0) for i in range(2)]
    for i in range(2):
        start_at(net, 0.0, [(shared, 1.0), (own[i], 1.0)], 20.0, str(i), done)
    net.call_later(1.0, lambda _a: net.set_capacity(shared, 10.0), None)
    env.run()
    # 10 B each by t = 1, then 5 B/s: t = 3
    assert done == pytest.approx({"0": 3.0, "1": 3.0}, rel=1e-12)


def test_a_link_with_no_capacity_starves_its_flows_until_restored() -> None:
    env, net, done = setup()
    link, other = net.link("l", "x", 100.0), net.link("m", "x", 100.0)
    start_at(net, 0.0, [(link, 1.0), (other, 1.0)], 100.0, "a", done)
    start_at(net, 0.0, [(other, 1.0)], 100.0, "b", done)
    net.call_later(1.0, lambda _a: net.set_capacity(link, 0.0), None)
    net.call_later(2.0, lambda _a: net.set_capacity(link, 100.0), None)
    env.run()
    # [0, 1]: 50 B/s each; [1, 2]: a starved, b alone at 100 B/s (done at t = 1.5);
    # from t = 2, a alone: its last 50 B at 100 B/s
    assert done == pytest.approx({"b": 1.5, "a": 2.5}, rel=1e-12)


def test_a_zero_weight_use_takes_no_capacity() -> None:
    env, net, done = setup()
    link = net.link("l", "x", 100.0)
    start_at(net, 0.0, [(link, 1.0)], 100.0, "a", done)
    other = net.link("m", "x", 50.0)
    start_at(net, 0.0, [(link, 0.0), (other, 1.0)], 100.0, "b", done)
    env.run()
    assert done == pytest.approx({"a": 1.0, "b": 2.0}, rel=1e-12)


@pytest.mark.parametrize("n", [20, 400])
def test_an_update_costs_its_neighbourhood_not_the_connected_set(n: int) -> None:
    """A chain of n flows, flow i over shared links i and i + 1 and a private link that binds
    it: one connected set of n flows. A flow joining, then leaving, at one end of the chain is
    solved with its neighbours only, whatever n is (a solve from scratch takes all n)."""
    env = simpy.Environment()
    net = Network(env)
    chain = [net.link(f"l{i}", "x", 100.0) for i in range(n + 1)]
    for i in range(n):
        own = net.link(f"p{i}", "x", 10.0)
        net.start([(chain[i], 1.0), (chain[i + 1], 1.0), (own, 1.0)], 1e30, lambda _f: None)
    env.run(until=1.0)
    assert_max_min(net)
    before = net.solver_flows
    late = net.start([(chain[0], 1.0)], 10.0, lambda _f: None)
    env.run(until=2.0)
    assert late.finished
    assert late.rate == 0.0 and net.links["p0"].flows
    assert_max_min(net)
    assert net.solver_flows - before <= 4


def test_random_runs_are_deterministic() -> None:
    rnd = random.Random(3)
    scenario: Scenario = ([100.0, 50.0, 450.0], [
        (rnd.choice([0.0, 0.5, 1.0]), [(i, rnd.choice(MECHANISM_WEIGHTS))
                                       for i in rnd.sample(range(3), rnd.randint(1, 3))],
         rnd.uniform(1.0, 300.0), INF) for _ in range(50)], [(1.2, 1, 10.0)])
    first, net1 = run(scenario, Network)
    second, net2 = run(scenario, Network)
    assert list(first.items()) == list(second.items())
    assert (net1.rate_updates, net1.solver_flows) == (net2.rate_updates, net2.solver_flows)
