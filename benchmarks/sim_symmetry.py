"""Cluster-scale simulation by rank symmetry (issue 33): what a prediction costs at 1,024 to
16,384 GPUs, and whether the targets are met. Prints tables and one line per target.

Each case runs in a child process of its own (``--case``), so its peak resident size
(``ru_maxrss``) is its own: the wall time (``time.perf_counter``) and CPU time
(``time.process_time``) of ``pkbsim.sim.simulate`` in that process, the fastest of ``--runs``
(a new process each), its peak memory, the transfers it started, the ranks it simulated
(``SimResult.symmetry``) and its predicted time, which must not depend on the path.

(a) one 1 GiB all-reduce per rank (``collective_spec("all_reduce")``, ``size`` = 1 GiB) under
    nccl_reference and custom_best, on ``h100-ib-2node`` with ``node.count`` = W / 8, at
    W = 128, 1,024, 4,096 and 16,384.  [targets: 1,024 GPUs < 2 s, 16,384 GPUs < 10 s]
(b) task 40 (DDP), production preset, custom_best, 64 ranks on ``h100-ib-2node`` with
    ``node.count`` = 16 (``pkbsim simulate -t 40 --strategy custom_best --topology
    h100-ib-2node --set node.count=16 -w 64 --preset production``).  [target: < 5 s]
(c) one all-to-all of 1 GiB per rank under nccl_reference, W = 1,024 to 16,384: a call whose
    classes stay 8 (one per local rank) while W grows.
(d) with ``--full``: the same cases with ``SimOptions(symmetry=False)`` where that is
    affordable (W <= 1,024 for (a) nccl_reference and (c), W = 128 for custom_best, (b)), to
    show the predicted times agree and what the full simulation costs.

Run: python benchmarks/sim_symmetry.py [--runs N] [--only a,b,c] [--full] [--max-world W]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

GIB = 2**30
TOPOLOGY = "h100-ib-2node"
GPUS_PER_NODE = 8
WORLDS = (128, 1024, 4096, 16384)
A2A_WORLDS = (1024, 4096, 16384)
TARGETS = {("a", 1024): 2.0, ("a", 16384): 10.0, ("b", 64): 5.0}
FULL_LIMIT = {"nccl_reference": 1024, "custom_best": 128}


@dataclass
class Case:
    group: str
    kind: str
    strategy: str
    world: int
    symmetry: bool = True

    @property
    def name(self) -> str:
        return f"{self.group}:{self.kind}:{self.strategy}:{self.world}:{int(self.symmetry)}"


def run_case(case: Case) -> dict[str, Any]:
    """In this process: build the instance, then time one simulation of it."""
    from pkbsim.planning.evaluate import collective_spec
    from pkbsim.sim import SimOptions, Strategy, simulate
    from pkbsim.task.loader import instantiate, load_task
    from pkbsim.topology.loader import load_topology

    if case.group == "b":
        topo = load_topology(TOPOLOGY, {"node.count": 16})
        inst = instantiate(load_task("40"), case.world, "production")
    else:
        topo = load_topology(TOPOLOGY, {"node.count": max(case.world // GPUS_PER_NODE, 2)})
        inst = instantiate(collective_spec(case.kind), case.world, "pkb", {"size": GIB})
    wall, cpu = time.perf_counter(), time.process_time()
    result = simulate(inst, topo, Strategy(case.strategy), SimOptions(symmetry=case.symmetry))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"wall_s": wall, "cpu_s": cpu, "peak_MiB": resource.getrusage(
        resource.RUSAGE_SELF).ru_maxrss / 1024, "flows": result.flows_started,
            "predicted_us": result.predicted_us, "simulation": result.symmetry,
            "algorithms": sorted({o.choice.algorithm for o in result.ops if o.choice})}


def child(case: Case, timeout: float) -> dict[str, Any]:
    """One case in a new interpreter (its own peak memory); an error or a timeout as text."""
    try:
        done = subprocess.run([sys.executable, __file__, "--case", case.name],
                              capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"over {timeout:.0f} s"}
    if done.returncode:
        return {"error": (done.stderr.strip().splitlines() or ["failed"])[-1][:160]}
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def cases(only: set[str], full: bool, max_world: int) -> list[Case]:
    out: list[Case] = []
    if "a" in only:
        out += [Case("a", "all_reduce", s, w) for w in WORLDS if w <= max_world
                for s in ("nccl_reference", "custom_best")]
    if "b" in only:
        out.append(Case("b", "ddp", "custom_best", 64))
    if "c" in only:
        out += [Case("c", "all_to_all", "nccl_reference", w) for w in A2A_WORLDS
                if w <= max_world]
    if full:
        out += [Case(c.group, c.kind, c.strategy, c.world, False) for c in list(out)
                if c.world <= (64 if c.group == "b" else FULL_LIMIT[c.strategy])]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--only", default="a,b,c")
    parser.add_argument("--full", action="store_true")
    parser.add_argument("--max-world", type=int, default=16384)
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--case", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        group, kind, strategy, world, sym = args.case.split(":")
        print(json.dumps(run_case(Case(group, kind, strategy, int(world), sym == "1"))))
        return
    print(f"# {platform.python_implementation()} {platform.python_version()}, "
          f"{os.cpu_count()} CPUs, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"load average {os.getloadavg()[0]:.2f}")
    print("| case | strategy | W | path | wall s | CPU s | peak MiB | flows | predicted us |"
          " algorithm | simulated |")
    print("|---|---|---:|---|---:|---:|---:|---:|---:|---|---|")
    results: dict[str, dict[str, Any]] = {}
    for case in cases(set(args.only.split(",")), args.full, args.max_world):
        best: dict[str, Any] | None = None
        for _ in range(args.runs):
            row = child(case, args.timeout)
            if "error" in row:
                best = row
                break
            if best is None or row["wall_s"] < best["wall_s"]:
                best = row
        assert best is not None
        results[case.name] = best
        path = "symmetric" if case.symmetry else "full"
        if "error" in best:
            print(f"| {case.group} {case.kind} | {case.strategy} | {case.world:,} | {path} | "
                  f"{best['error']} | | | | | | |", flush=True)
            continue
        ranks = best["simulation"].split(" ranks")[0].replace("symmetric: ", "").replace(
            "full: ", "all ")
        print(f"| {case.group} {case.kind} | {case.strategy} | {case.world:,} | {path} | "
              f"{best['wall_s']:.2f} | {best['cpu_s']:.2f} | {best['peak_MiB']:,.0f} | "
              f"{best['flows']:,} | {best['predicted_us']:,.1f} | "
              f"{','.join(best['algorithms'])} | {ranks} |", flush=True)
    print()
    for (group, world), limit in TARGETS.items():
        for name, row in results.items():
            g, _, strategy, w, sym = name.split(":")
            if g != group or int(w) != world or sym != "1":
                continue
            if "error" in row:
                print(f"target ({group}) {strategy} W = {world:,} < {limit:g} s: not run "
                      f"({row['error']})")
                continue
            verdict = "met" if row["wall_s"] < limit else (
                f"missed by {row['wall_s'] / limit:.2f}x")
            print(f"target ({group}) {strategy} W = {world:,} < {limit:g} s: "
                  f"{row['wall_s']:.2f} s, {verdict}")
    for name, row in results.items():
        g, kind, strategy, w, sym = name.split(":")
        other = results.get(f"{g}:{kind}:{strategy}:{w}:0")
        if sym == "1" and other and "error" not in row and "error" not in other:
            rel = row["predicted_us"] / other["predicted_us"] - 1
            print(f"({g}) {strategy} W = {int(w):,}: symmetric / full predicted time - 1 = "
                  f"{rel:+.2e}; full {other['wall_s']:.2f} s, {other['peak_MiB']:,.0f} MiB")


if __name__ == "__main__":
    main()
