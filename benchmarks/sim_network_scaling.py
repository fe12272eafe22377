"""Speed of the simulator where flows share links (issue 18, part 6). Prints tables; asserts
nothing.

Where flows share links (trees, all-to-all, anything over the NICs of a multi-node machine),
every start and finish changes the max-min fair rates of the flows around it
(pkbsim/sim/network.py), so the cost of a run can grow faster than its number of transfers.
Per case: the wall time in this process (``time.perf_counter``) and the CPU time of this
process (``time.process_time``; other processes on the machine inflate the first, much less
the second), each the fastest of ``--runs`` with the cyclic garbage of earlier runs collected
first (untimed); the flows started and the rate updates (a flow's rate set or changed), summed
over every simulation the case runs (custom_best without a fixed piece count simulates the
shortlisted algorithms of each op alone, then the task at 1, 2, 4, ... pieces); us/flow = wall
/ flows; and the predicted time (us), which must not change with the solver.

(a) one 1 GiB all-reduce per rank (``collective_spec("all_reduce")``, ``size`` = 1 GiB) under
    nccl_reference and custom_best (``pkbsim.sim.simulate``) at world sizes 16, 32, 64, 128
    and 1,024 on ``h100-ib-2node`` with ``node.count`` = W / 8 (8 GPUs and 8 NICs a node).
    [target: 1,024 GPUs < 60 s]
(b) ``pkbsim simulate -t 40 --strategy custom_best --topology h100-ib-2node --set
    node.count=16 -w 64 --preset production`` in process: DDP with its 224 MiB gradient
    all-reduce and three broadcasts of the same size, with compute (HBM contention), at 64
    ranks over InfiniBand; nccl_reference of the same for comparison.   [target: < 10 s]
(c) a tree all-reduce (``simulate_collective``, algorithm tree, nccl_simple, 1 GiB, 64 chunks)
    at W = 16 to 1,024 on the same machines: 4 channels per rank share its NVLink and NIC ports
    and the pipeline keeps flows starting and finishing at different instants, so each update
    has a large connected set of flows around it (the cost grew as about flows^1.6 when
    every update solved the whole set).
    Then the exponent b of wall ~ flows^b (least squares of log CPU time against log flows,
    over the runs with >= 10,000 flows) of (c), and of each strategy of (a).
    [target: b <= 1.1]

A point is skipped, and the table says so, when its estimate (the previous point of its series
scaled by the ratio of GPUs to the power of the exponent fitted so far, 1.5 before two points)
exceeds ``--limit`` seconds (120 by default).

Run: python benchmarks/sim_network_scaling.py [--runs N] [--limit S] [--only a|b|c]
     [--no-1024]
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

GIB = 2**30
WORLDS = (16, 32, 64, 128)
BIG_WORLD = 1024
TREE_WORLDS = (16, 32, 64, 128, 256, 512, 1024)
TREE_CHUNKS = 64
STRATEGIES = ("nccl_reference", "custom_best")
TOPOLOGY = "h100-ib-2node"
GPUS_PER_NODE = 8


@dataclass
class Row:
    case: str
    world: int
    wall_s: float = 0.0
    cpu_s: float = 0.0
    flows: int = 0
    rate_updates: int = 0
    sims: int = 0
    predicted_us: float = 0.0
    note: str = ""


class Tally:
    """Flows and rate updates of every simulation run while it is installed: a wrapper around
    ``Simulation.run`` that reads the network's counters after each run (nothing else)."""

    def __init__(self) -> None:
        self.flows = 0
        self.rate_updates = 0
        self.sims = 0

    def __enter__(self) -> Tally:
        from pkbsim.sim.engine import Simulation

        self._orig = Simulation.run
        tally = self

        def run(sim: Any) -> float:
            try:
                return tally._orig(sim)
            finally:
                tally.flows += sim.net.flows_started
                tally.rate_updates += sim.net.rate_updates
                tally.sims += 1

        Simulation.run = run  # type: ignore[method-assign]
        return self

    def __exit__(self, *_exc: object) -> None:
        from pkbsim.sim.engine import Simulation

        Simulation.run = self._orig  # type: ignore[method-assign]


def measure(case: str, world: int, fn: Callable[[], Any], runs: int) -> Row:
    row = Row(case, world, wall_s=float("inf"), cpu_s=float("inf"))
    for _ in range(runs):
        gc.collect()
        with Tally() as tally:
            wall, cpu = time.perf_counter(), time.process_time()
            result = fn()
            row.wall_s = min(row.wall_s, time.perf_counter() - wall)
            row.cpu_s = min(row.cpu_s, time.process_time() - cpu)
        row.flows, row.rate_updates, row.sims = tally.flows, tally.rate_updates, tally.sims
        row.predicted_us = (result.predicted_us if hasattr(result, "predicted_us")
                            else result.time_s * 1e6)
    return row


def topology(world: int) -> Any:
    from pkbsim.topology.loader import load_topology

    return load_topology(TOPOLOGY, {"node.count": max(world // GPUS_PER_NODE, 2)})


def all_reduce(strategy: str, world: int) -> Callable[[], Any]:
    from pkbsim.planning.evaluate import collective_spec
    from pkbsim.sim import Strategy, simulate
    from pkbsim.task.loader import instantiate

    topo = topology(world)
    inst = instantiate(collective_spec("all_reduce"), world, "pkb", {"size": GIB})
    return lambda: simulate(inst, topo, Strategy(strategy))


def ddp(strategy: str) -> Callable[[], Any]:
    from pkbsim.sim import Strategy, simulate
    from pkbsim.task.loader import instantiate, load_task
    from pkbsim.topology.loader import load_topology

    topo = load_topology(TOPOLOGY, {"node.count": 16})
    inst = instantiate(load_task("40"), 64, "production")
    return lambda: simulate(inst, topo, Strategy(strategy))


def tree(world: int) -> Callable[[], Any]:
    from pkbsim.sim import simulate_collective

    topo = topology(world)
    return lambda: simulate_collective(topo, "all_reduce", GIB, world, "tree", "nccl_simple",
                                       TREE_CHUNKS)


def exponent(rows: list[Row]) -> tuple[float, int] | None:
    """Least-squares slope of log CPU time against log flows over the rows with >= 10,000
    flows."""
    big = [r for r in rows if r.flows >= 10_000 and not r.note]
    if len(big) < 2 or len({r.flows for r in big}) < 2:
        return None
    slope, _ = statistics.linear_regression([math.log(r.flows) for r in big],
                                            [math.log(r.cpu_s) for r in big])
    return slope, len(big)


def estimate(done: list[Row], world: int) -> float:
    if not done:
        return 0.0
    b = 1.5
    if len(done) >= 2:
        b, _ = statistics.linear_regression([math.log(r.world) for r in done],
                                            [math.log(r.wall_s) for r in done])
    return float(done[-1].wall_s * (world / done[-1].world) ** max(b, 1.0))


HEADER = (f"{'case':<34}{'W':>6}{'wall s':>9}{'cpu s':>8}{'flows':>11}{'rate upd':>11}"
          f"{'sims':>5}{'us/flow':>9}{'predicted us':>14}")


def show(row: Row) -> None:
    if row.note:
        print(f"{row.case:<34}{row.world:>6}   {row.note}")
        return
    print(f"{row.case:<34}{row.world:>6}{row.wall_s:>9.2f}{row.cpu_s:>8.2f}{row.flows:>11,}"
          f"{row.rate_updates:>11,}{row.sims:>5}{row.wall_s / max(row.flows, 1) * 1e6:>9.2f}"
          f"{row.predicted_us:>14,.1f}")


def series(case: str, worlds: tuple[int, ...], make: Callable[[int], Callable[[], Any]],
           runs: int, limit: float) -> list[Row]:
    rows: list[Row] = []
    done: list[Row] = []
    for world in worlds:
        guess = estimate(done, world)
        if guess > limit:
            row = Row(case, world, note=f"skipped: estimated {guess:,.0f} s > {limit:g} s")
        else:
            row = measure(case, world, make(world), runs)
            done.append(row)
        show(row)
        rows.append(row)
    return rows


def table(title: str) -> None:
    print(f"\n{title}")
    print(HEADER)
    print("-" * len(HEADER))


def section_a(runs: int, limit: float, big: bool) -> list[Row]:
    table(f"(a) 1 GiB all-reduce, {TOPOLOGY} with node.count = W / {GPUS_PER_NODE}, "
          "simulate() in process")
    worlds = (*WORLDS, *((BIG_WORLD,) if big else ()))
    rows: list[Row] = []
    for strategy in STRATEGIES:
        rows += series(f"all_reduce 1GiB {strategy}", worlds,
                       lambda w, s=strategy: all_reduce(s, w), runs, limit)
        last = rows[-1]
        if big and not last.note:
            verdict = "ok" if last.wall_s < 60 else "MISSED"
            print(f"{'':<40}1,024 GPUs: {last.wall_s:.1f} s [target < 60 s: {verdict}]")
    return rows


def section_b(runs: int) -> None:
    table("(b) task 40 (DDP), preset production, W = 64, h100-ib-2node --set node.count=16")
    last = Row("", 0)
    for strategy in STRATEGIES:
        last = measure(f"40 ddp production {strategy}", 64, ddp(strategy), runs)
        show(last)
    verdict = "ok" if last.wall_s < 10 else "MISSED"
    print(f"{'':<40}custom_best: {last.wall_s:.1f} s [target < 10 s: {verdict}]")


def section_c(runs: int, limit: float, rows_a: list[Row]) -> None:
    table(f"(c) tree all-reduce 1 GiB, nccl_simple, {TREE_CHUNKS} chunks, {TOPOLOGY}, "
          "simulate_collective()")
    rows = series("tree all_reduce 1GiB", TREE_WORLDS, tree, runs, limit)
    print("\nwall ~ flows^b (log CPU s against log flows, runs with >= 10,000 flows) "
          "[target b <= 1.1]")
    fits = [("(c) tree all-reduce", rows)]
    fits += [(f"(a) {s}", [r for r in rows_a if r.case.endswith(s)]) for s in STRATEGIES]
    for label, chosen in fits:
        fit = exponent(chosen)
        print(f"  {label:<24} " + ("too few points" if fit is None
                                   else f"b = {fit[0]:.3f} over {fit[1]} runs"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1, help="keep the fastest of N runs")
    parser.add_argument("--limit", type=float, default=120.0,
                        help="skip a point whose estimated wall time exceeds this (s)")
    parser.add_argument("--only", choices=("a", "b", "c"), help="run one section")
    parser.add_argument("--no-1024", action="store_true", help="leave out the 1,024-GPU point")
    args = parser.parse_args()
    runs = max(1, args.runs)
    import simpy

    import pkbsim

    print(f"machine: {platform.node()} {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, Python {platform.python_version()}, simpy "
          f"{simpy.__version__}, pkbsim {pkbsim.__version__}; load average "
          f"{os.getloadavg()[0]:.2f}; runs {runs}")
    all_reduce("nccl_reference", 16)()  # warm imports and caches
    start = time.perf_counter()
    rows_a: list[Row] = []
    if args.only in (None, "a"):
        rows_a = section_a(runs, args.limit, not args.no_1024)
    if args.only in (None, "b"):
        section_b(runs)
    if args.only in (None, "c"):
        section_c(runs, args.limit, rows_a)
    print(f"\ntotal {time.perf_counter() - start:.1f} s; load average at end "
          f"{os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
