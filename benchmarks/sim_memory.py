"""A simulation's peak memory against pkbsim.sim.memory's estimate (issue 33). Prints tables;
asserts nothing.

Each case runs ``pkbsim.sim.simulate`` in a child process of its own under an address-space
limit (``--limit-mb``, RLIMIT_AS, 4,000 MiB unless given), so a case that grows past it ends
with a MemoryError there, never this process or the machine. The child first simulates a tiny
case (W = 8, 1 KiB) of the same strategy, so that modules imported on first use are loaded,
then resets the kernel's record of its peak resident size (``/proc/self/clear_refs``), reads
its resident size (VmRSS), simulates the case, and reports its peak resident size since the
reset (VmHWM) less that: the memory the simulation added, measured. The
estimate is ``pkbsim.sim.memory.count`` at each ``Builder.build`` of the case (custom_best
builds once per piece count tried), the largest, priced at ``pkbsim.sim.memory.BYTES``; its
up-front check is disabled in the child (PKBSIM_MAX_SIM_MEMORY_MB is set high).

The constants (``BYTES``) are fitted on the FIT half of the cases: the cases in the order
listed, the 1st, 3rd, 5th, ... (odd positions); the 2nd, 4th, ... are held out. The fit is a
least squares of the measured bytes on the counted items, each case weighted by 1 / measured
(relative errors), each price at least a floor (FLOORS), then scaled up so that it
over-estimates every fit case; the shipped constants are those x 1.25, rounded up (a margin
for cases unlike the fit half). The
tables show the shipped constants' error (predicted / measured) on each half: the signed
median ratio, the median and the largest |ratio - 1|, the smallest ratio.

    python benchmarks/sim_memory.py                 # every case, then the fit
    python benchmarks/sim_memory.py --cases 1-6     # some of them (positions, 1-based)
    python benchmarks/sim_memory.py --json rows.json   # keep the rows; --from-json rows.json
                                                       # reports them again (new constants)
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from typing import Any

import numpy as np
from scipy.optimize import lsq_linear

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GIB, MIB = 2**30, 2**20

# (what, world size, bytes per rank, strategy, topology); what: a collective kind, or
# task:<name> at its pkb preset
CASES: list[tuple[str, int, int, str, str]] = [
    ("all_reduce", 16, GIB, "nccl_reference", "h100-ib-2node"),
    ("all_reduce", 64, GIB, "nccl_reference", "h100-ib-2node"),
    ("all_reduce", 256, GIB, "nccl_reference", "h100-ib-2node"),
    ("all_reduce", 1024, GIB, "nccl_reference", "h100-ib-2node"),
    ("all_to_all", 16, GIB, "nccl_reference", "h100-ib-2node"),
    ("all_to_all", 64, GIB, "nccl_reference", "h100-ib-2node"),
    ("all_to_all", 256, GIB, "nccl_reference", "h100-ib-2node"),
    ("all_to_all", 512, GIB, "nccl_reference", "h100-ib-2node"),
    ("all_reduce", 16, GIB, "custom_best", "h100-ib-2node"),
    ("all_reduce", 32, GIB, "custom_best", "h100-ib-2node"),
    ("all_reduce", 64, GIB, "custom_best", "h100-ib-2node"),
    ("all_reduce", 256, MIB, "custom_best", "h100-ib-2node"),
    ("all_to_all", 16, MIB, "custom_best", "h100-ib-2node"),
    ("all_to_all", 64, MIB, "custom_best", "h100-ib-2node"),
    ("all_to_all", 128, MIB, "custom_best", "h100-ib-2node"),
    ("all_to_all", 256, 64 * 1024, "custom_best", "h100-ib-2node"),
    ("all_gather", 64, GIB, "nccl_reference", "h100-ib-2node"),
    ("all_gather", 256, GIB, "nccl_reference", "h100-ib-2node"),
    ("reduce_scatter", 256, GIB, "nccl_reference", "h100-ib-2node"),
    ("reduce_scatter", 64, GIB, "custom_best", "h100-ib-2node"),
    ("task:grpo", 64, 0, "nccl_reference", "h100-ib-2node"),
    ("task:grpo", 64, 0, "custom_best", "h100-ib-2node"),
    ("task:27_moe_all2all_primitive", 64, 0, "nccl_reference", "h100-ib-2node"),
    ("task:27_moe_all2all_primitive", 64, 0, "custom_best", "h100-ib-2node"),
    ("task:13_gemm_allreduce", 64, 0, "nccl_reference", "h100-ib-2node"),
    ("task:13_gemm_allreduce", 64, 0, "custom_best", "h100-ib-2node"),
]
# the least bytes one item takes (sys.getsizeof of its objects, rounded down): a Node with its
# dicts and lists, a set entry and its 2-tuple, a cache entry and its key tuple, a Flow with its
# finish event, a generator's state as deep-sized (bytes)
FLOORS = {"ranks": 0.0, "nodes": 400.0, "members": 50.0, "messages": 100.0, "routes": 150.0,
          "pairs": 150.0, "live": 300.0, "programs": 1.0}
ITEMS = ("ranks", "nodes", "members", "messages", "routes", "pairs", "live", "programs")


def _load(what: str, w: int, size: int, topo_name: str) -> tuple[Any, Any]:
    from pkbsim.planning.evaluate import collective_spec
    from pkbsim.task.loader import instantiate, load_task
    from pkbsim.topology.loader import load_topology

    topo = load_topology(topo_name, {"node.count": max(1, w // 8)} if "ib" in topo_name
                         else {})
    if what.startswith("task:"):
        return instantiate(load_task(what[5:]), w, "pkb", {}), topo
    return instantiate(collective_spec(what), w, "pkb", {"size": float(size)}), topo


def _status_kib(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {key} in /proc/self/status")


def child(what: str, w: int, size: int, strategy: str, topo_name: str) -> None:
    """One case in this process: print its measured and counted items as JSON."""
    os.environ["PKBSIM_MAX_SIM_MEMORY_MB"] = str(10**9)
    from pkbsim.sim import Strategy, memory, simulate

    counted: list[dict[str, float]] = []
    base = [0]
    seconds: list[float] = []

    def check(builder: Any, iterations: int, ranks: Any = None, nodes: Any = None) -> None:
        t = time.perf_counter()
        found = memory.count(builder, iterations, ranks, nodes).as_dict()
        seconds.append(time.perf_counter() - t)
        counted.append({"held": _status_kib("VmRSS") * 1024 - base[0], **found})

    memory.check = check  # type: ignore[assignment]
    tiny, tiny_topo = _load("all_reduce" if not what.startswith("task:") else what, 8, 1024,
                            topo_name)
    simulate(tiny, tiny_topo, Strategy(strategy))
    inst, topo = _load(what, w, size, topo_name)
    counted.clear()
    seconds.clear()
    gc.collect()
    with open("/proc/self/clear_refs", "w") as f:  # the peak resident size (VmHWM) from now
        f.write("5")
    base[0] = _status_kib("VmRSS") * 1024
    t = time.perf_counter()
    error = None
    try:
        simulate(inst, topo, Strategy(strategy))
    except (MemoryError, Exception) as exc:  # the case's error is part of its row
        error = f"{type(exc).__name__}: {exc}"[:160]
    wall = time.perf_counter() - t
    peak = _status_kib("VmHWM") * 1024
    best = max(counted, key=lambda c: _predict(c, memory.BYTES), default=None)
    print(json.dumps({"measured": peak - base[0], "base": base[0], "wall_s": wall,
                      "error": error, "counts": best, "count_s": max(seconds, default=0.0)}))


def run_case(case: tuple[str, int, int, str, str], limit_mb: int, timeout: float
             ) -> dict[str, Any]:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit_mb * MIB, limit_mb * MIB))

    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    try:
        proc = subprocess.run([sys.executable, __file__, "--child", *map(str, case)],
                              capture_output=True, text=True, timeout=timeout,
                              preexec_fn=limit, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"over {timeout:.0f} s"}
    lines = proc.stdout.strip().splitlines()
    if proc.returncode or not lines:
        return {"error": (proc.stderr.strip().splitlines() or ["no output"])[-1][:160]}
    out: dict[str, Any] = json.loads(lines[-1])
    return out


def _predict(counts: dict[str, float], prices: dict[str, float]) -> float:
    """The check's figure, less the resident size before the simulation: what the process
    held more at the check (an earlier run's garbage, custom_best) plus the estimate."""
    return counts.get("held", 0.0) + sum(prices[k] * counts[k] for k in ITEMS)


def fit(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Least squares of measured bytes on the items (relative errors), each price at least
    its floor (FLOORS: what one item's Python objects take at the least, so that collinear
    items are not priced at 0), scaled up to over-estimate every row."""
    a = np.array([[r["counts"][k] / r["measured"] for k in ITEMS] for r in rows])
    b = np.array([1 - r["counts"].get("held", 0.0) / r["measured"] for r in rows])
    x = lsq_linear(a, b, bounds=([FLOORS[k] for k in ITEMS], [np.inf] * len(ITEMS))).x
    prices = dict(zip(ITEMS, (float(v) for v in x), strict=True))
    worst = max(r["measured"] / max(_predict(r["counts"], prices), 1.0) for r in rows)
    return {k: v * worst for k, v in prices.items()}


def summary(ratios: list[float]) -> str:
    if not ratios:
        return "no cases"
    dev = [abs(q - 1) for q in ratios]
    return (f"{len(ratios)} cases: median predicted/measured {statistics.median(ratios):.2f}, "
            f"median |ratio - 1| {statistics.median(dev):.2f}, largest {max(dev):.2f}, "
            f"smallest ratio {min(ratios):.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", help="positions (1-based), e.g. 1-4,9")
    parser.add_argument("--limit-mb", type=int, default=4000)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--json", help="write the rows here too")
    parser.add_argument("--from-json", help="report the rows of an earlier --json again (with "
                        "the constants shipped now) instead of running the cases")
    args = parser.parse_args()
    if args.from_json:
        with open(args.from_json) as f:
            report(json.load(f))
        return
    chosen = range(1, len(CASES) + 1)
    if args.cases:
        chosen = sorted({i for part in args.cases.split(",")
                         for i in (range(int(part.split("-")[0]), int(part.split("-")[-1]) + 1))})
    rows = []
    for i in chosen:
        row = run_case(CASES[i - 1], args.limit_mb, args.timeout)
        row.update(position=i, half="fit" if i % 2 else "held", case=CASES[i - 1])
        rows.append(row)
        print(f"case {i} done", file=sys.stderr, flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    report(rows)


def report(rows: list[dict[str, Any]]) -> None:
    from pkbsim.sim.memory import BYTES
    from pkbsim.units import format_bytes

    print(f"{'#':>2} {'half':4} {'case':54} {'measured MiB':>12} {'estimate MiB':>12} "
          f"{'ratio':>6} {'wall s':>7} {'count s':>7}")
    for row in rows:
        i = row["position"]
        what, w, size, strategy, topo = row["case"]
        label = (f"{what} W={w}" + (f" {format_bytes(size)}" if size else "")
                 + f" {strategy} {topo}")
        if row.get("counts") and row.get("measured", 0) > 0:
            est = _predict(row["counts"], BYTES)
            row["ratio"] = est / row["measured"]
            print(f"{i:>2} {row['half']:4} {label:54} {row['measured'] / MIB:12.1f} "
                  f"{est / MIB:12.1f} {row['ratio']:6.2f} {row['wall_s']:7.1f} "
                  f"{row['count_s']:7.3f}" + (f"  ({row['error']})" if row["error"] else ""))
        else:
            print(f"{i:>2} {row['half']:4} {label:54} {row.get('error')}")
    good = [r for r in rows if "ratio" in r]
    fitted = fit([r for r in good if r["half"] == "fit"]) if good else {}
    print("\nConstants (bytes per item): shipped (pkbsim.sim.memory.BYTES) / fitted now on the "
          "fit half")
    for k in ITEMS:
        print(f"  {k:9} {BYTES[k]:10.1f} {fitted.get(k, 0.0):10.1f}")
    for half in ("fit", "held"):
        print(f"Shipped constants, {half} half: "
              + summary([r["ratio"] for r in good if r["half"] == half]))
    if fitted:
        for half in ("fit", "held"):
            ratios = [_predict(r["counts"], fitted) / r["measured"] for r in good
                      if r["half"] == half]
            print(f"Fitted now, {half} half: " + summary(ratios))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        what, w, size, strategy, topo = sys.argv[2:7]
        child(what, int(w), int(size), strategy, topo)
    else:
        main()
