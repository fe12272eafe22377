"""The model's error on real programs, per machine, on the held-out half (no GPU needed).

    python benchmarks/pkb_programs_error.py [--machine h100|h200 ...] [--markdown]

For each machine with a committed validation run (docs/measurements/<machine>/results.json,
made by `pkbsim validate --cases 'hbm.*,launch.*,host.dispatch,host.copy,kernels.*,pkb.*'`)
and its shipped calibrated topology (docs/measurements/<machine>-1gpu.yaml, made by
`pkbsim calibrate`, which fitted the host costs on the odd problem ids and the kernel kinds on
the even positions of each size sweep), it prints:

1. PKB's references at W = 1, M = 1024 and 4096, the held-out half (even problem ids):
   `nccl_reference` on the calibrated topology (the traced program at that point) against PKB's
   mean per call (the geometric mean of the repetitions): the signed median (predicted /
   measured), the median |error|, the share within 1.5x; by size and regime.
2. The measurement's own run-to-run spread: repetition 2 against repetition 1 of the same
   problem and size (fresh processes minutes apart).
3. GRPO at the blog's sizes (W = 1, batch 1, vocab 32,000): predicted against measured.
4. The kernel kinds on the held-out half (odd positions of each size sweep).
5. Each machine predicted from the other's fit: the other's host costs (as they are, and scaled
   by the ratio of this machine's cheap probe, host.dispatch's one eager torch.add, to the
   other's), the other's kernel kinds, and this machine's own spec sheet (HBM rate, peaks)
   with its own launch and copy measurements.
Nothing is fitted here.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
from pathlib import Path

from pkbsim.errors import PkbsimError
from pkbsim.sim import Strategy, simulate
from pkbsim.task.loader import instantiate, load_task
from pkbsim.topology import load_topology
from pkbsim.topology.schema import Topology
from pkbsim.validation import programs
from pkbsim.validation.results import Measurement, Results, load

ROOT = Path(__file__).resolve().parent.parent
MEASURED = ROOT / "docs/measurements"
MACHINES = {"h100": "dgx-h100", "h200": "dgx-h200"}
GRPO = "83_vocab_parallel_log_prob_topk_chunked"


def predict_row(row: programs.ProgramRow, topo: Topology) -> float | None:
    spec = load_task(row.problem)
    sets = {k: v for k, v in (("M", row.rows), ("N", row.cols)) if k in spec.settable()}
    try:
        return simulate(instantiate(spec, 1, "pkb", sets), topo,
                        Strategy("nccl_reference")).predicted_us
    except PkbsimError:
        return None


def predict_grpo(seq: int, topo: Topology) -> float:
    inst = instantiate(load_task(GRPO), 1, "pkb", {"batch": 1, "seq": seq, "vocab": 32000})
    return simulate(inst, topo, Strategy("nccl_reference")).predicted_us


def summary(ratios: list[float]) -> str:
    if not ratios:
        return "-"
    within = sum(1 / 1.5 <= r <= 1.5 for r in ratios) / len(ratios)
    return (f"{len(ratios)} rows, median predicted/measured {statistics.median(ratios):.2f}, "
            f"median |error| {statistics.median(abs(r - 1) for r in ratios):.0%}, "
            f"within 1.5x {within:.0%}")


def reference_table(results: Results, topo: Topology, markdown: bool) -> list[float]:
    rows = programs.program_rows(m for _, m in results.measurements("pkb_reference"))
    held = [r for r in rows if not r.fit_half and r.counts is not None]
    ratios: dict[str, list[float]] = {}
    lines = []
    for r in held:
        pred = predict_row(r, topo)
        if pred is None:
            continue
        ratio = pred / r.time_us
        regime = "host-bound" if r.host_bound else "device-bound"
        for group in ("all", f"M = {r.rows}", regime):
            ratios.setdefault(group, []).append(ratio)
        lines.append(f"| {r.problem} | {r.rows} | {r.time_us:,.1f} | "
                     f"{' / '.join(f'{t:,.1f}' for t in r.reps)} | {pred:,.1f} | "
                     f"{ratio:.2f} | {regime} |")
    if markdown:
        print("| problem | M | measured µs (geo. mean) | repetitions µs | predicted µs | "
              "predicted / measured | regime |")
        print("|---|---:|---:|---:|---:|---:|---|")
        print("\n".join(lines))
        print()
    for group in sorted(ratios, key=lambda g: (g != "all", g)):
        print(f"- {group}: {summary(ratios[group])}")
    untraced = sorted({r.problem for r in rows if r.counts is None})
    if untraced:
        print(f"- no traced program (not compared): {', '.join(untraced)}")
    return ratios.get("all", [])


def spread(results: Results) -> None:
    rows = programs.program_rows(m for _, m in results.measurements("pkb_reference"))
    diffs = [r.reps[1] / r.reps[0] - 1 for r in rows if len(r.reps) >= 2]
    if not diffs:
        print("- one repetition only: no spread")
        return
    print(f"- {len(diffs)} problem-sizes measured twice: median |rep 2 / rep 1 - 1| "
          f"{statistics.median(abs(d) for d in diffs):.0%}, median signed "
          f"{statistics.median(diffs):+.0%}, "
          f"from {min(diffs):+.0%} to {max(diffs):+.0%}; within 1.5x of each other "
          f"{sum(1 / 1.5 <= 1 + d <= 1.5 for d in diffs) / len(diffs):.0%}")


def grpo_table(results: Results, topo: Topology) -> None:
    by_seq: dict[int, list[float]] = {}
    for _, m in results.measurements("grpo_blog"):
        by_seq.setdefault(int(m.params["seq"]), []).append(m.time_us)
    if not by_seq:
        print("- not measured")
        return
    print("| seq | measured µs (reps) | predicted µs | predicted / measured |")
    print("|---:|---:|---:|---:|")
    for seq in sorted(by_seq):
        meas = math.exp(statistics.fmean(math.log(t) for t in by_seq[seq]))
        pred = predict_grpo(seq, topo)
        reps = " / ".join(f"{t:,.0f}" for t in by_seq[seq])
        print(f"| {seq:,} | {meas:,.0f} ({reps}) | {pred:,.0f} | {pred / meas:.2f} |")


def kernel_table(results: Results, topo: Topology) -> None:
    points = programs.kernel_points(m for _, m in results.measurements("kernel_kind"))
    if not points:
        print("- not measured")
        return
    print("| kind | fit points | held-out points | median predicted / measured | "
          "median |error| | calibrated e_mem | e_comp | fixed µs |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for kind in sorted(points):
        k = topo.kernels.get(kind)
        if k is None:
            continue
        fit = programs.KindFit(kind, k.memory_efficiency, k.compute_efficiency, k.fixed_us, 0,
                               0, 0.0)
        held = [m for m, on_fit in points[kind] if not on_fit]
        ratios = [programs.kernel_model_us(m, fit, topo, k.memory_efficiency,
                                           k.compute_efficiency) / m.time_us for m in held]
        n_fit = sum(1 for _, on_fit in points[kind] if on_fit)
        med = statistics.median(ratios) if ratios else math.nan
        err = statistics.median(abs(r - 1) for r in ratios) if ratios else math.nan
        print(f"| {kind} | {n_fit} | {len(held)} | {med:.2f} | {err:.0%} | "
              f"{k.memory_efficiency:.3g} | {k.compute_efficiency:.3g} | {k.fixed_us:.3g} |")


def kernel_spread(results: Results) -> None:
    """The kernel timings' own spread: pass 2 against pass 1 of the same operator and size."""
    first: dict[tuple[str, str, str, int], float] = {}
    diffs = []
    for _, m in results.measurements("kernel_kind"):
        key = (str(m.params.get("op")), str(m.params.get("dtype")), str(m.params.get("shape")),
               m.size_bytes)
        if m.params.get("rep") == 0:
            first[key] = m.time_us
        elif key in first:
            diffs.append(m.time_us / first[key] - 1)
    if diffs:
        print(f"\nKernel timings run to run: {len(diffs)} operator-sizes timed twice, median "
              f"|pass 2 / pass 1 - 1| {statistics.median(abs(d) for d in diffs):.1%}, largest "
              f"{max(abs(d) for d in diffs):.0%}")


def probe_us(results: Results) -> float | None:
    ms: list[Measurement] = [m for _, m in results.measurements("host_torch_op")]
    hosts = [float(m.params.get("host_us") or m.time_us) for m in ms]
    return statistics.median(hosts) if hosts else None


def transferred(target: str, source: str, runs: dict[str, Results], probe: bool
                ) -> tuple[Topology, float] | None:
    """``target``'s own topology with ``source``'s host costs (scaled by the probe ratio where
    ``probe``) and kernel kinds; and the ratio."""
    mine, theirs = calibrated(target), calibrated(source)
    p_mine, p_theirs = probe_us(runs[target]), probe_us(runs[source])
    if mine is None or theirs is None or not p_mine or not p_theirs:
        return None
    scale = p_mine / p_theirs if probe else 1.0
    lat = theirs.latency
    host = {f: getattr(lat, f) * scale for f in ("host_call_us", "host_view_us",
                                                  "host_launch_us", "host_collective_us",
                                                  "host_sync_us")}
    host["host_library_us"] = lat.library_us * scale
    return (dataclasses.replace(mine, latency=dataclasses.replace(mine.latency, **host),
                                kernels=dict(theirs.kernels)), p_mine / p_theirs)


def calibrated(machine: str) -> Topology | None:
    path = MEASURED / f"{machine}-1gpu.yaml"
    return load_topology(str(path)) if path.is_file() else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--machine", action="append", choices=sorted(MACHINES))
    parser.add_argument("--markdown", action="store_true", help="print every held-out row")
    args = parser.parse_args()
    machines = args.machine or sorted(MACHINES)
    runs = {m: load(MEASURED / m / "results.json") for m in machines
            if (MEASURED / m / "results.json").is_file()}
    for machine, results in runs.items():
        topo = calibrated(machine)
        env = results.environment
        print(f"\n## {machine}: {env.get('gpu_name')}, {env.get('date')}, torch "
              f"{env.get('torch')} (docs/measurements/{machine}/results.json)\n")
        if topo is None:
            print(f"no calibrated topology docs/measurements/{machine}-1gpu.yaml")
            continue
        print("PKB's references at W = 1, held-out half (even ids), on the calibrated "
              "topology:\n")
        reference_table(results, topo, args.markdown)
        print("\nRun to run (the measurement's own spread):\n")
        spread(results)
        print("\nGRPO at the blog's sizes, W = 1:\n")
        grpo_table(results, topo)
        print("\nKernel kinds, held-out half (odd positions of each size sweep):\n")
        kernel_table(results, topo)
        kernel_spread(results)
    for target in runs:
        for source in runs:
            if source == target:
                continue
            for probe in (False, True):
                made = transferred(target, source, runs, probe)
                if made is None:
                    continue
                topo, ratio = made
                how = (f"host costs x the probe ratio {ratio:.3g}" if probe else
                       "host costs as they are")
                print(f"\n## {target} predicted from {source}'s fit ({how}, {source}'s kernel "
                      f"kinds, {target}'s spec sheet and launch measurements)\n")
                reference_table(runs[target], topo, False)
                print()
                grpo_table(runs[target], topo)


if __name__ == "__main__":
    main()
