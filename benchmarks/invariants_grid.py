"""The model's physical invariants over the whole grid (pkbsim/invariants.py; docs/metrics.md,
Invariants). Prints the points checked, the points skipped by reason, every violation and the
run time; exits 1 when there is a violation not in --known.

    python benchmarks/invariants_grid.py [--max-world-size N] [--every K] [--task ID ...]
        [--topology NAME ...] [--no-collectives] [--no-instances] [--curve-max-world-size N]
        [--curve-max-total-bytes B] [--jobs N] [--slowest N] [--progress]

The slow test's grid (tests/test_invariants.py) is
    --max-world-size 32 --curve-max-world-size 72 --curve-max-total-bytes 17179869184

Grid: every task (tasks/*.yaml) x each of its presets x W in {1, 2, 4, 8, the topology's
largest} x every shipped topology (topologies/*.yaml), where the task and the topology accept
the instance: its roofline and both strategies simulated (nccl_reference, custom_best). Then,
per topology, every collective kind at W in {2, one node, the whole machine}: each
(algorithm, mechanism) the topology allows, simulated alone (custom_best's pipeline chunks),
and NCCL's choice (nccl_reference, nccl-tests' host model), at 1 B .. 1 GiB per rank
(--curve-max-total-bytes drops sizes whose W x size exceeds it).
"""

from __future__ import annotations

import argparse
import sys
import time

from pkbsim.invariants import (
    INVARIANTS,
    WORLD_SIZES,
    check_grid,
    grid,
    load_grid_inputs,
    sample,
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max-world-size", type=int, default=None,
                        help="leave out (and count) instances above this W")
    parser.add_argument("--every", type=int, default=1, help="check every K-th instance")
    parser.add_argument("--task", action="append", default=None)
    parser.add_argument("--topology", action="append", default=None)
    parser.add_argument("--no-collectives", action="store_true")
    parser.add_argument("--no-instances", action="store_true",
                        help="the bare-collective curves only")
    parser.add_argument("--curve-max-total-bytes", type=float, default=None,
                        help="leave out curve sizes whose W x size exceeds this")
    parser.add_argument("--curve-max-world-size", type=int, default=None,
                        help="collective curves only at W up to this")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes for instances")
    parser.add_argument("--slowest", type=int, default=5, help="list the N slowest instances")
    parser.add_argument("--progress", action="store_true", help="each point on stderr")
    args = parser.parse_args()
    begin = time.perf_counter()
    specs, topos = load_grid_inputs(args.task, args.topology)
    points, skipped = grid(specs, topos, WORLD_SIZES, args.max_world_size)
    points = [] if args.no_instances else sample(points, args.every)

    def progress(where: str) -> None:
        print(f"  {time.perf_counter() - begin:8.1f} s  {where}", file=sys.stderr, flush=True)

    report = check_grid(points, {} if args.no_instances else skipped,
                        [] if args.no_collectives else topos,
                        max_bytes_total=args.curve_max_total_bytes,
                        progress=progress if args.progress else None, jobs=args.jobs,
                        curve_max_world_size=args.curve_max_world_size)
    print(f"Invariants: {', '.join(f'{k} ({v})' for k, v in INVARIANTS.items())}")
    print(f"Tasks {len(specs)}, topologies {len(topos)}, W in {list(WORLD_SIZES)} and each "
          f"topology's largest" + (f" (up to {args.max_world_size})"
                                   if args.max_world_size else "")
          + (f", every {args.every}th instance" if args.every > 1 else ""))
    print(f"Instances checked: {report.points}")
    print(f"Instances skipped: {sum(report.skipped.values())}")
    for reason, n in report.skipped.items():
        print(f"  {n:6d}  {reason}")
    print(f"Bare-collective curves checked: {report.curves} ({report.curve_points} sizes)"
          + (f", W up to {args.curve_max_world_size}" if args.curve_max_world_size else "")
          + (f", W x size up to {args.curve_max_total_bytes:g} B"
             if args.curve_max_total_bytes else ""))
    print(f"Violations: {len(report.violations)}")
    by_kind: dict[str, int] = {}
    for v in report.violations:
        by_kind[v.invariant] = by_kind.get(v.invariant, 0) + 1
    for k, n in sorted(by_kind.items()):
        print(f"  {n:6d}  {k}")
    for v in report.violations:
        print(f"  - {v}")
    print(f"NCCL configuration steps (a larger call faster where NCCL changed its algorithm, "
          f"protocol or channel count; listed, not violations): {len(report.nccl_steps)}")
    for v in report.nccl_steps:
        print(f"  - {v.where}: {v.detail}")
    if args.slowest:
        print(f"Slowest instances (of {report.points}):")
        for r in report.slowest[:args.slowest]:
            print(f"  {r.seconds:8.2f} s  {r.where}")
    print(f"Run time: {time.perf_counter() - begin:.1f} s (checks {report.seconds:.1f} s)")
    return 1 if report.violations else 0


if __name__ == "__main__":
    sys.exit(main())
