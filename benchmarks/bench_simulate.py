"""Speed of the simulator. Prints figures; asserts nothing.

Every figure is wall time in this process (``time.perf_counter``), min and median over N runs
unless said otherwise; "flows" are the transfers the network simulated (one fluid flow, i.e. one
transfer event, each); events/s = flows / wall time. Before each timed call the cyclic
garbage of the previous ones is collected (``gc.collect()``, untimed); section 1 prints what
that collection costs after a large run.

1. nvl72: one 1 GiB all-reduce on ``gb200-nvl72`` (72 GPUs), algorithm ring, 64 chunks,
   mechanism nccl_simple: wall time of ``simulate_collective`` (build + run), flows, events/s,
   simulated time and busbw, with the model's closed form for the ring next to it (bandwidth
   term + start latency + chunks x 2(W-1) step latencies).   [target: < 5 s]
2. 1024: ``h100-ib-2node`` with ``node.count`` overridden to 128 (128 nodes x 8 GPUs): one
   1 GiB all-reduce by ``hierarchical_tree`` (reduce-scatter inside each node, a double binary
   tree across the nodes, all-gather inside each node), 16 chunks, the headline; the same at
   8 and 32 nodes to show how events/s changes with the node count.   [target: < 60 s]
   Then ``hierarchical`` (a direct two-shot across the nodes) at 8, 16 and 32 nodes with
   4 chunks. Its flows are W x chunks x 2 (g-1 + k-1) (g GPUs per node, k nodes): every rank
   talks to every other node, so at 128 nodes and 16 chunks it would be 1024 x 16 x 2 x
   (7 + 127) = 4,390,912 (~4.4 M) flows; it is not run at that size, only extrapolated.
3. scaling: simulation cost against GPUs x chunks: ring all-reduce of 1 GiB on gb200-nvl72 at
   W in {8, 16, 32, 72} x chunks in {1, 4, 16, 64} (a point whose estimate, from the previous
   chunk count at the same W, exceeds 10 s, or 1 s with --quick, is skipped), then the same
   for ``tree`` all-reduce and ``direct`` all-to-all, where a rank's flows share its links so
   every start and finish recomputes max-min rates over a connected set of flows. Each table
   ends with a least-squares fit of wall time against flows (slope in us/event, intercept,
   R^2), the ratio of the per-event cost of the largest run to that of the smallest, and the
   exponent b of wall ~ flows^b fitted on the runs with >= 1000 flows (b <= 1: no worse than
   linear in the number of transfer events).
4. tasks, in-process (``pkbsim simulate`` adds the interpreter's start):
   ``run_simulation("grpo", S)`` for S in nccl_reference and custom_best (median of N), then
   every shipped task at its default world size, preset pkb, on dgx-h100, under both
   strategies, once: total wall time, the slowest tasks, and every failure with its traceback.

Run: python benchmarks/bench_simulate.py [--runs N] [--quick] [--only SECTION ...]
     (SECTION: nvl72, 1024, scaling, tasks; --quick skips the 1024-GPU run and the largest
     scaling points)
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import platform
import resource
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

SECTIONS = ("nvl72", "1024", "scaling", "tasks")
GIB = 2**30


def timed(fn: Callable[[], Any], runs: int) -> tuple[list[float], Any]:
    """Wall times of ``runs`` calls of ``fn`` and the last call's result. The cyclic garbage
    of earlier runs is collected first, outside the timing, so that no run pays for another's
    (a large simulation leaves hundreds of thousands of objects in reference cycles)."""
    times, result = [], None
    for _ in range(runs):
        gc.collect()
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return times, result


def spread(times: list[float]) -> str:
    return f"min {min(times):.3f} s, median {statistics.median(times):.3f} s"


def peak_rss_mib() -> float:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / 2**20 if sys.platform == "darwin" else rss / 2**10


def collective(topo: Any, kind: str, world: int, algorithm: str, chunks: int
               ) -> Callable[[], Any]:
    from pkbsim.sim import simulate_collective

    return lambda: simulate_collective(topo, kind, GIB, world, algorithm, "nccl_simple", chunks)


# ---------------------------------------------------------------- 1. 72 GPUs


def nvl72(runs: int) -> None:
    from pkbsim.topology.loader import load_topology

    print("\n== 1. 72 GPUs: 1 GiB all-reduce, gb200-nvl72, ring, 64 chunks, nccl_simple ==")
    load_times, topo = timed(lambda: load_topology("gb200-nvl72"), runs)
    print(f"load_topology(gb200-nvl72): {spread(load_times)} (not in the times below)")
    w, chunks = 72, 64
    times, r = timed(collective(topo, "all_reduce", w, "ring", chunks), runs)
    best = min(times)
    print(f"simulate_collective ({runs} runs): {spread(times)}, max {max(times):.3f} s   "
          f"[target: < 5 s]")
    print(f"flows {r.flows:,} (expected W x 2(W-1) x chunks = {w * 2 * (w - 1) * chunks:,}), "
          f"rate updates {r.rate_updates:,}")
    print(f"events/s: {r.flows / best:,.0f} at the min, "
          f"{r.flows / statistics.median(times):,.0f} at the median; "
          f"{best / r.flows * 1e6:.2f} us/event")
    print(f"simulated time {r.time_s * 1e3:.3f} ms, algbw {r.algbw_Bps / 1e9:.1f} GB/s, "
          f"busbw {r.busbw_Bps / 1e9:.1f} GB/s")
    mech = topo.mechanisms["nccl_simple"]
    rate = topo.peer_line_rate_GBps * 1e9 * mech.efficiency
    bw_s = 2 * (w - 1) / w * GIB / rate
    steps_s = chunks * 2 * (w - 1) * mech.step_latency_s
    print(f"closed form: bandwidth {bw_s * 1e3:.3f} ms (2(W-1)/W x 1 GiB at "
          f"{topo.peer_line_rate_GBps:.0f} GB/s x {mech.efficiency}) + start "
          f"{mech.latency_s * 1e3:.4f} ms + {chunks} chunks x {2 * (w - 1)} steps x "
          f"{mech.step_latency_us} us = {steps_s * 1e3:.3f} ms; total "
          f"{(bw_s + mech.latency_s + steps_s) * 1e3:.3f} ms")
    start = time.perf_counter()
    found = gc.collect()
    print(f"gc.collect() after the last run: {found:,} unreachable objects in "
          f"{time.perf_counter() - start:.3f} s (the run's cyclic garbage; not in the times "
          f"above); peak RSS so far: {peak_rss_mib():.0f} MiB")


# ---------------------------------------------------------------- 2. 1024 GPUs


def scale_out(runs: int, quick: bool) -> None:
    from pkbsim.topology.loader import load_topology

    print("\n== 2. 1024 GPUs: 1 GiB all-reduce, h100-ib-2node with node.count = k, "
          "nccl_simple ==")
    header = (f"{'algorithm':<18}{'nodes':>6}{'GPUs':>6}{'chunks':>7}{'flows':>10}"
              f"{'min s':>9}{'median s':>9}{'events/s':>10}{'sim ms':>9}{'busbw GB/s':>11}")
    print(header)
    print("-" * len(header))
    tree_nodes = (8, 32) if quick else (8, 32, 128)
    rows: list[tuple[str, int, int]] = [("hierarchical_tree", k, 16) for k in tree_nodes]
    rows += [("hierarchical", k, 4) for k in (8, 16, 32)]
    rate_at: dict[tuple[str, int], float] = {}
    headline: list[float] = []
    for algorithm, k, chunks in rows:
        topo = load_topology("h100-ib-2node", {"node.count": k})
        w = topo.total_gpus
        times, r = timed(collective(topo, "all_reduce", w, algorithm, chunks), runs)
        rate_at[(algorithm, k)] = r.flows / min(times)
        if (algorithm, k) == ("hierarchical_tree", 128):
            headline = times
        print(f"{algorithm:<18}{k:>6}{w:>6}{chunks:>7}{r.flows:>10,}{min(times):>9.2f}"
              f"{statistics.median(times):>9.2f}{r.flows / min(times):>10,.0f}"
              f"{r.time_s * 1e3:>9.3f}{r.busbw_Bps / 1e9:>11.1f}")
    if headline:
        print(f"1024 GPUs, hierarchical_tree, 16 chunks ({runs} runs): {spread(headline)}   "
              f"[target: < 60 s]")
    else:
        print("1024 GPUs: skipped (--quick)")
    g, k, chunks = 8, 128, 16
    flows = g * k * chunks * 2 * (g - 1 + k - 1)
    rate = rate_at[("hierarchical", 32)]
    print(f"hierarchical (two-shot across nodes) at {k} nodes x {chunks} chunks would be "
          f"{flows:,} flows: ~{flows / rate:,.0f} s at its 32-node rate of {rate:,.0f} "
          f"events/s (a lower bound: the rate falls as nodes grow)")
    print(f"peak RSS so far: {peak_rss_mib():.0f} MiB")


# ---------------------------------------------------------------- 3. scaling


def scaling_table(title: str, kind: str, algorithm: str, worlds: tuple[int, ...],
                  chunk_counts: tuple[int, ...], runs: int, limit_s: float) -> None:
    from pkbsim.topology.loader import load_topology

    topo = load_topology("gb200-nvl72")
    print(f"\n-- {title}: 1 GiB {kind}, gb200-nvl72, {algorithm}, nccl_simple --")
    header = (f"{'W':>4}{'chunks':>7}{'flows':>10}{'rate upd':>10}{'min s':>9}{'median s':>9}"
              f"{'events/s':>10}{'us/event':>9}{'sim ms':>9}{'busbw GB/s':>11}")
    print(header)
    print("-" * len(header))
    points: list[tuple[int, float]] = []  # (flows, min wall s)
    for w in worlds:
        prev: tuple[int, float] | None = None  # (chunks, min wall s) at this W
        for chunks in chunk_counts:
            if prev is not None and prev[1] * chunks / prev[0] > limit_s:
                print(f"{w:>4}{chunks:>7}   skipped: estimated "
                      f"{prev[1] * chunks / prev[0]:.1f} s > {limit_s:g} s")
                continue
            times, r = timed(collective(topo, kind, w, algorithm, chunks), runs)
            best = min(times)
            prev = (chunks, best)
            points.append((r.flows, best))
            print(f"{w:>4}{chunks:>7}{r.flows:>10,}{r.rate_updates:>10,}{best:>9.3f}"
                  f"{statistics.median(times):>9.3f}{r.flows / best:>10,.0f}"
                  f"{best / r.flows * 1e6:>9.2f}{r.time_s * 1e3:>9.3f}"
                  f"{r.busbw_Bps / 1e9:>11.1f}")
    linearity(points)


def linearity(points: list[tuple[int, float]]) -> None:
    """Least squares of wall time against flows, and the per-event cost at the two ends."""
    if len(points) < 3:
        print("fit: too few points")
        return
    xs = [float(f) for f, _ in points]
    ys = [t for _, t in points]
    slope, intercept = statistics.linear_regression(xs, ys)
    r2 = statistics.correlation(xs, ys) ** 2
    small = min(points)
    large = max(points)
    ratio = (large[1] / large[0]) / (small[1] / small[0])
    print(f"fit wall = a + b x flows: b = {slope * 1e6:.2f} us/event, a = "
          f"{intercept * 1e3:.2f} ms, R^2 = {r2:.4f}")
    big = [(f, t) for f, t in points if f >= 1000]
    exponent = ""
    if len(big) >= 3:
        b, _ = statistics.linear_regression([math.log(f) for f, _ in big],
                                            [math.log(t) for _, t in big])
        exponent = f"; wall ~ flows^{b:.3f} over the {len(big)} runs with >= 1000 flows"
    print(f"per-event cost, largest run ({large[0]:,} flows) / smallest ({small[0]:,} flows): "
          f"{large[1] / large[0] * 1e6:.2f} / {small[1] / small[0] * 1e6:.2f} us = "
          f"{ratio:.2f}{exponent}")


def scaling(runs: int, quick: bool) -> None:
    print("\n== 3. scaling: simulation cost against GPUs x chunks ==")
    limit = 1.0 if quick else 10.0
    worlds = (8, 16, 32, 72)
    scaling_table("ring (no shared links)", "all_reduce", "ring", worlds, (1, 4, 16, 64),
                  runs, limit)
    scaling_table("tree (shared links: max-min recomputation)", "all_reduce", "tree", worlds,
                  (1, 4, 16, 64), runs, limit)
    scaling_table("direct all-to-all (every flow of a rank shares its links)", "all_to_all",
                  "direct", worlds, (1, 4, 16, 64), runs, limit)


# ---------------------------------------------------------------- 4. tasks


def tasks(runs: int) -> None:
    from pkbsim.sim.run import run_simulation
    from pkbsim.task.loader import list_tasks

    print("\n== 4. tasks: run_simulation in-process, dgx-h100, preset pkb ==")
    for strategy in ("nccl_reference", "custom_best"):
        times, r = timed(lambda s=strategy: run_simulation("grpo", s), runs)
        print(f"run_simulation('grpo', {strategy!r}) ({runs} runs): {spread(times)}; "
              f"task {r.instance.spec.key}, W {r.instance.world_size}, predicted "
              f"{r.predicted_us:.1f} us, pieces {r.pieces}, flows {r.flows_started:,}")
    paths = list_tasks()
    failures: list[tuple[str, str, str]] = []
    for strategy in ("nccl_reference", "custom_best"):
        per_task: list[tuple[float, str]] = []
        flows = 0
        start = time.perf_counter()
        for path in paths:
            t0 = time.perf_counter()
            try:
                flows += run_simulation(str(path), strategy).flows_started
            except Exception as exc:  # a failure here is a bug to report, not to stop on
                failures.append((strategy, path.stem, "".join(
                    traceback.format_exception(type(exc), exc, exc.__traceback__))))
            per_task.append((time.perf_counter() - t0, path.stem))
        total = time.perf_counter() - start
        per_task.sort(reverse=True)
        slowest = ", ".join(f"{name} {t:.2f} s" for t, name in per_task[:3])
        print(f"all {len(paths)} tasks, {strategy}: {total:.2f} s "
              f"(mean {total / len(paths) * 1e3:.0f} ms, {flows:,} flows in the kept runs); "
              f"slowest: {slowest}")
    print(f"failures: {len(failures)}")
    for strategy, name, tb in failures:
        print(f"--- {name} under {strategy}:\n{tb}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="repetitions of each timing")
    parser.add_argument("--quick", action="store_true",
                        help="skip the 1024-GPU run and the largest scaling points")
    parser.add_argument("--only", action="append", choices=SECTIONS, metavar="SECTION",
                        help=f"run only this section (repeatable): {', '.join(SECTIONS)}")
    args = parser.parse_args()
    runs = max(1, args.runs)
    chosen = args.only or list(SECTIONS)
    import simpy

    import pkbsim

    print(f"machine: {platform.node()} {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, Python {platform.python_version()}, simpy "
          f"{simpy.__version__}, pkbsim {pkbsim.__version__}")
    print(f"load average at start: {', '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"runs {runs}{', quick' if args.quick else ''}; sections {', '.join(chosen)}")
    from pkbsim.topology.loader import load_topology

    collective(load_topology("dgx-h100"), "all_reduce", 8, "ring", 2)()  # warm imports
    start = time.perf_counter()
    if "nvl72" in chosen:
        nvl72(runs)
    if "1024" in chosen:
        scale_out(runs, args.quick)
    if "scaling" in chosen:
        scaling(runs, args.quick)
    if "tasks" in chosen:
        tasks(runs)
    print(f"\ntotal {time.perf_counter() - start:.1f} s; load average at end: "
          f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}; peak RSS {peak_rss_mib():.0f} MiB")


if __name__ == "__main__":
    main()
