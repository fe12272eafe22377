"""The fluid network on its own: max-min fair rates, exact finish times, on a bare simpy clock.

Every expected time below is worked out by hand from the flows' bytes, weights and the links'
capacities (progressive filling: all flows of a component rise together until a link or a flow's
own cap saturates; the saturated ones freeze and the rest go on).
"""

from __future__ import annotations

import random
from typing import Any

import pytest
import simpy

from pkbsim.sim.network import Flow, Link, Network


class Recorder:
    """``on_done`` callback that records (label, finish time)."""

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self.done: dict[str, float] = {}
        self.order: list[str] = []

    def __call__(self, label: str) -> Any:
        def on_done(flow: Flow) -> None:
            assert label not in self.done, f"{label} finished twice"
            self.done[label] = self.env.now
            self.order.append(label)

        return on_done


def setup() -> tuple[simpy.Environment, Network, Recorder]:
    env = simpy.Environment()
    return env, Network(env), Recorder(env)


def start_at(net: Network, t: float, uses: list[tuple[Link, float]], nbytes: float,
             on_done: Any, cap: float = float("inf")) -> None:
    net.call_later(t, lambda _arg: net.start(uses, nbytes, on_done, cap=cap), None)


def test_one_flow_alone_takes_bytes_times_weight_over_capacity() -> None:
    env, net, rec = setup()
    link = net.link("l", "scale_up", 100.0)
    flow = net.start([(link, 2.0)], 1000.0, rec("a"))
    env.run()
    assert rec.done["a"] == pytest.approx(1000.0 * 2.0 / 100.0, rel=1e-12)
    assert flow.rate == 0.0 and flow.remaining == 0.0
    assert link.wire_bytes == pytest.approx(2000.0)  # capacity units: bytes x weight
    assert not link.flows


def test_one_flow_over_two_links_runs_at_the_slower() -> None:
    env, net, rec = setup()
    fast, slow = net.link("fast", "x", 300.0), net.link("slow", "x", 100.0)
    net.start([(fast, 1.0), (slow, 1.0 / 0.8)], 400.0, rec("a"))  # 80 B/s on the slow link
    env.run()
    assert rec.done["a"] == pytest.approx(400.0 / 80.0, rel=1e-12)


def test_two_flows_share_a_link_equally_and_the_survivor_speeds_up() -> None:
    env, net, rec = setup()
    link = net.link("l", "x", 100.0)
    net.start([(link, 1.0)], 100.0, rec("short"))
    net.start([(link, 1.0)], 300.0, rec("long"))
    env.run()
    # 50 B/s each: the short one is done at t = 2 with the long one at 100 of 300 bytes;
    # alone at 100 B/s the long one needs 2 more seconds
    assert rec.done == pytest.approx({"short": 2.0, "long": 4.0}, rel=1e-12)
    assert rec.order == ["short", "long"]
    assert link.wire_bytes == pytest.approx(400.0)


def test_a_late_flow_slows_down_the_one_already_running() -> None:
    env, net, rec = setup()
    link = net.link("l", "x", 100.0)
    net.start([(link, 1.0)], 200.0, rec("early"))
    start_at(net, 1.0, [(link, 1.0)], 200.0, rec("late"))
    env.run()
    # early: 100 B alone in [0, 1], then 50 B/s for its other 100 B -> t = 3; late has moved
    # 100 B by then and finishes alone at 100 B/s -> t = 4
    assert rec.done == pytest.approx({"early": 3.0, "late": 4.0}, rel=1e-12)


def test_weighted_max_min_three_flows_two_links() -> None:
    """Link A (12 units/s) carries a (2 units per byte) and b; link B (10 units/s) carries a and c.

    Progressive filling at a common rate r: A saturates first (2r + r = 12 -> r = 4; B would at
    r + r = 10 -> r = 5), freezing a = b = 4; c takes B's rest: 10 - 4 = 6. After a finishes
    (40 B at 4 B/s, t = 10), b has 40 B left alone on A at 12 B/s (t = 10 + 10/3) and c has 60 B
    left alone on B at 10 B/s (t = 16).
    """
    env, net, rec = setup()
    a_link, b_link = net.link("A", "x", 12.0), net.link("B", "x", 10.0)
    fa = net.start([(a_link, 2.0), (b_link, 1.0)], 40.0, rec("a"))
    fb = net.start([(a_link, 1.0)], 80.0, rec("b"))
    fc = net.start([(b_link, 1.0)], 120.0, rec("c"))
    env.run(until=1.0)
    assert (fa.rate, fb.rate, fc.rate) == pytest.approx((4.0, 4.0, 6.0), rel=1e-12)
    env.run()
    assert rec.done == pytest.approx({"a": 10.0, "b": 10.0 + 40.0 / 12.0, "c": 16.0},
                                     rel=1e-12)
    assert a_link.wire_bytes == pytest.approx(40.0 * 2 + 80.0)
    assert b_link.wire_bytes == pytest.approx(40.0 + 120.0)


def reference_max_min(flows: list[Flow]) -> dict[int, float]:
    """Textbook weighted progressive filling, recomputing every sum from scratch each round."""
    rates: dict[int, float] = {}
    active = {f.id: f for f in flows}
    spare = {link.id: link.capacity for f in flows for link, _ in f.uses}
    while active:
        weight: dict[str, float] = {}
        for f in active.values():
            for link, w in f.uses:
                weight[link.id] = weight.get(link.id, 0.0) + w
        level = min([max(spare[lid], 0.0) / w for lid, w in weight.items() if w > 0]
                    + [f.cap for f in active.values()])
        tight = {lid for lid, w in weight.items()
                 if w > 0 and max(spare[lid], 0.0) / w <= level * (1 + 1e-9)}
        for f in [f for f in active.values() if f.cap <= level * (1 + 1e-9)
                  or any(link.id in tight for link, _ in f.uses)]:
            rates[f.id] = level
            del active[f.id]
            for link, w in f.uses:
                spare[link.id] -= level * w
    return rates


def rates_at_start(specs: list[tuple[list[tuple[Link, float]], float]], env: simpy.Environment,
                   net: Network) -> list[Flow]:
    """Start every flow at t = 0 (far too big to finish) and let the rates settle."""
    flows = [net.start(uses, 1e30, lambda _f: None, cap=cap) for uses, cap in specs]
    env.run(until=1e-12)
    return flows


MECHANISM_WEIGHTS = [1 / 0.69, 1 / 0.75, 1 / 0.78, 1 / 0.82, 1 / 0.87, 1 / 0.94, 1 / 0.41, 1.0]


def test_a_drained_link_does_not_starve_the_other_flows() -> None:
    """Four flows saturate link s (132 units/s, e.g. free SMs); the fifth runs on a 450 GB/s
    link it shares only with the third. It must get the rest of that link, not ~0 (started in
    this order, the four weights summed and subtracted again leave 1.1e-15 on s)."""
    env, net, _ = setup()
    s, x = net.link("s", "sm", 132.0), net.link("x", "scale_up", 450e9)
    w = [1.3333333333333333, 2.4390243902439024, 1.2195121951219512, 1.4492753623188408]
    inf = float("inf")
    flows = rates_at_start([([(s, w[0])], inf), ([(s, w[1])], inf),
                            ([(x, 2.4390243902439024), (s, w[2])], inf), ([(s, w[3])], inf),
                            ([(x, 1.3333333333333333)], inf)], env, net)
    level = 132.0 / sum(w)
    assert [f.rate for f in flows[:4]] == pytest.approx([level] * 4, rel=1e-12)
    assert flows[4].rate == pytest.approx((450e9 - level * 2.4390243902439024)
                                          / 1.3333333333333333, rel=1e-9)


def test_rates_match_textbook_progressive_filling_on_random_instances() -> None:
    rnd = random.Random(1)
    worst = 0.0
    for _ in range(300):
        env, net, _ = setup()
        links = [net.link(f"l{i}", "x", rnd.choice([450e9, 50e9, 3350e9, 132.0]))
                 for i in range(rnd.randint(1, 5))]
        specs = []
        for _k in range(rnd.randint(2, 30)):
            chosen = rnd.sample(links, rnd.randint(1, min(3, len(links))))
            cap = rnd.choice([float("inf")] * 3 + [rnd.choice([20e9, 100e9, 40.0])])
            specs.append(([(link, rnd.choice(MECHANISM_WEIGHTS)) for link in chosen], cap))
        flows = rates_at_start(specs, env, net)
        expected = reference_max_min(flows)
        for f in flows:
            worst = max(worst, abs(f.rate - expected[f.id]) / expected[f.id])
        for link in links:  # feasible: no link above capacity
            assert sum(f.rate * w for f in flows for lk, w in f.uses
                       if lk is link) <= link.capacity * (1 + 1e-9)
    assert worst < 1e-9


def test_per_flow_cap_leaves_the_rest_to_the_others() -> None:
    env, net, rec = setup()
    link = net.link("l", "x", 100.0)
    net.start([(link, 1.0)], 100.0, rec("capped"), cap=20.0)
    net.start([(link, 1.0)], 480.0, rec("free"))
    env.run()
    # capped at 20 B/s (t = 5); the other gets 80 B/s, has moved 400 B at t = 5 and its last
    # 80 B go at the full 100 B/s
    assert rec.done == pytest.approx({"capped": 5.0, "free": 5.8}, rel=1e-12)


def test_cap_alone() -> None:
    env, net, rec = setup()
    link = net.link("l", "x", 100.0)
    net.start([(link, 1.0)], 300.0, rec("a"), cap=30.0)
    env.run()
    assert rec.done["a"] == pytest.approx(10.0, rel=1e-12)


def test_set_capacity_mid_flight() -> None:
    env, net, rec = setup()
    link = net.link("l", "x", 100.0)
    net.start([(link, 1.0)], 1000.0, rec("a"))
    net.call_later(4.0, lambda _arg: net.set_capacity(link, 50.0), None)
    net.call_later(8.0, lambda _arg: net.set_capacity(link, 200.0), None)
    env.run()
    # 400 B by t = 4, 200 B more by t = 8 at 50 B/s, the last 400 B at 200 B/s: t = 10
    assert rec.done["a"] == pytest.approx(10.0, rel=1e-12)
    assert link.wire_bytes == pytest.approx(1000.0)


def test_set_capacity_rebalances_a_shared_component() -> None:
    env, net, rec = setup()
    shared, private = net.link("shared", "x", 100.0), net.link("private", "x", 100.0)
    net.start([(shared, 1.0), (private, 1.0)], 300.0, rec("a"))
    net.start([(shared, 1.0)], 300.0, rec("b"))
    # 50 B/s each; at t = 2 the private link of a drops to 10 B/s: b gets 90 B/s
    net.call_later(2.0, lambda _arg: net.set_capacity(private, 10.0), None)
    env.run()
    # b: 100 B by t = 2, 200 B more at 90 B/s; a: 100 B by t = 2, then 10 B/s until b is gone
    t_b = 2.0 + 200.0 / 90.0
    assert rec.done["b"] == pytest.approx(t_b, rel=1e-12)
    assert rec.done["a"] == pytest.approx(2.0 + 200.0 / 10.0, rel=1e-12)


def test_zero_byte_and_linkless_flows_complete_at_once() -> None:
    env, net, rec = setup()
    link = net.link("l", "x", 100.0)
    start_at(net, 3.0, [(link, 1.0)], 0.0, rec("empty"))
    start_at(net, 3.0, [], 500.0, rec("nowhere"))
    env.run()
    assert rec.done == {"empty": 3.0, "nowhere": 3.0}
    assert not link.flows and link.wire_bytes == 0.0


def test_call_later_runs_in_time_then_creation_order() -> None:
    env, net, _ = setup()
    seen: list[tuple[float, str]] = []

    def note(arg: str) -> None:
        seen.append((env.now, arg))

    for delay, label in ((2.0, "a"), (1.0, "b"), (2.0, "c"), (1.0, "d"), (0.0, "e")):
        net.call_later(delay, note, label)
    # a call made while a bucket runs, due at the same instant, still runs (in a later event)
    net.call_later(1.0, lambda _arg: net.call_later(0.0, note, "f"), None)
    env.run()
    assert seen == [(0.0, "e"), (1.0, "b"), (1.0, "d"), (1.0, "f"), (2.0, "a"), (2.0, "c")]


def test_many_flows_conserve_bytes_and_never_exceed_capacity() -> None:
    """Random flows over a few links: every byte is accounted once, and no link carried more
    than capacity x elapsed time."""
    env, net, rec = setup()
    rnd = random.Random(7)
    links = [net.link(f"l{i}", "x", rnd.choice([50.0, 100.0, 400.0])) for i in range(5)]
    expected = {link.id: 0.0 for link in links}
    for k in range(40):
        chosen = rnd.sample(links, rnd.randint(1, 3))
        uses = [(link, rnd.choice([1.0, 1.25, 2.0])) for link in chosen]
        nbytes = rnd.uniform(10.0, 500.0)
        for link, w in uses:
            expected[link.id] += nbytes * w
        start_at(net, rnd.uniform(0.0, 5.0), uses, nbytes, rec(f"f{k}"),
                 cap=rnd.choice([float("inf"), 30.0]))
    env.run()
    assert len(rec.done) == 40
    for link in links:
        assert link.wire_bytes == pytest.approx(expected[link.id], rel=1e-9)
        assert link.wire_bytes <= link.capacity * env.now * (1 + 1e-9)
        assert not link.flows


def _random_run(seed: int) -> tuple[list[tuple[str, float]], int, int]:
    env, net, rec = setup()
    rnd = random.Random(seed)
    links = [net.link(f"l{i}", "x", 100.0 * (i + 1)) for i in range(4)]
    for k in range(60):
        uses = [(link, 1.0 + rnd.random()) for link in rnd.sample(links, rnd.randint(1, 3))]
        start_at(net, rnd.choice([0.0, 0.5, 1.0, 2.5]), uses, rnd.uniform(1.0, 300.0),
                 rec(f"f{k}"))
    env.run()
    return list(rec.done.items()), net.flows_started, net.rate_updates


def test_determinism() -> None:
    first = _random_run(11)
    assert first == _random_run(11)  # the same order, the same float times, the same counts
    assert first[1] == 60
