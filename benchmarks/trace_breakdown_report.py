"""Where the measured time of PKB's references and candidates went, from their own Kineto
traces, beside the model's split (issue 32): a Markdown report.

    python benchmarks/trace_breakdown_report.py LOGS[:SUMMARY] [LOGS ...] --topology TOPO.yaml \
        [--write FILE.md] [--title TEXT]

Each LOGS is a folder in PKB's layout as ``pkbsim run`` and validate/pkb_references.py write
it (``problem_<stem>/<backend>/rank_0_{perf,profile}.json`` and ``rank_0_trace.json.gz``);
``:SUMMARY`` names validate/pkb_references.py's summary, whose rows hold the references'
``call_event_us`` (that script writes no profile file beside the trace). Every problem is
compared as ``pkbsim compare --measured LOGS --measured-trace LOGS`` does (no what-if
simulations). Per variant: PKB's timed mean (``wall_time_ms``, no profiler), the
profiled calls' mean by CUDA events, the sum of the trace's terms and its error against those
events (the target: within 5% on every one), the terms, and for PKB's reference the model's
terms beside them. Then: how many sums are within 5%, the profiler's inflation (profiled /
PKB-timed), and per term the model against the measurement over the references (median of
model - measured, and of the ratio where both are non-zero).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import platform
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pkbsim.comparator.comparison import (  # noqa: E402
    Comparison,
    compare_problem,
    timeline_comparisons,
)
from pkbsim.comparator.timelines import (  # noqa: E402
    SUM_TOLERANCE,
    TimelineComparison,
    load_traces,
)
from pkbsim.errors import PkbsimError  # noqa: E402
from pkbsim.pkb.logs import load_measured  # noqa: E402
from pkbsim.task.loader import instantiate, load_task  # noqa: E402
from pkbsim.timeline.breakdown import decompose  # noqa: E402
from pkbsim.timeline.events import HOST, SYNC, term_key  # noqa: E402
from pkbsim.topology import load_topology  # noqa: E402

MAIN_TERMS = (HOST, SYNC, "communication", "kernels")


def pkb_timed_us(logs: Path, problem: str, variant: str) -> float | None:
    perf = logs / f"problem_{problem}" / variant / "rank_0_perf.json"
    try:
        return float(json.loads(perf.read_text())["wall_time_ms"]) * 1e3
    except (OSError, ValueError, KeyError, TypeError):
        return None


def kernels_us(terms: dict[str, float]) -> float:
    return sum(v for k, v in terms.items() if k.startswith("kernel:"))


def row(logs: Path, c: Comparison, t: TimelineComparison) -> list[str]:
    m = t.measured
    pkb = pkb_timed_us(logs, c.problem, t.variant)
    top = sorted(((k, v) for k, v in m.terms.items() if k.startswith("kernel:")),
                 key=lambda kv: -kv[1])[:2]
    kinds = ", ".join(f"{k[7:]} {v:.1f}" for k, v in top) or "-"
    model = t.model.total_us if t.model is not None else None
    est = t.host_without_profiler_us
    return [c.problem, t.variant, fmt(pkb), fmt(t.event_mean_us), fmt(m.total_us),
            "-" if t.sum_error is None else f"{t.sum_error:+.1%}",
            fmt(m.terms.get(HOST, 0.0)), fmt(est), fmt(m.terms.get(SYNC, 0.0)),
            fmt(m.terms.get("communication", 0.0) + m.terms.get("wait_ranks", 0.0)),
            fmt(kernels_us(m.terms)), kinds,
            fmt(model) if t.variant == "reference" else "-"]


def fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def table(head: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    return out + ["| " + " | ".join(r) + " |" for r in rows]


def compare_folder(logs: Path, summary: Path | None, topo: object, errors: list[str]
                   ) -> list[Comparison]:
    """Every problem of ``logs`` compared, its traces split beside the model's; the
    references' CUDA-event times taken from ``summary`` where given."""
    traces = load_traces(logs)
    if summary is not None:
        rows = {r["problem"]: r for r in json.loads(summary.read_text())["problems"]}
        for (problem, variant), parts in traces.items():
            events = rows.get(problem, {}).get("call_event_us")
            if variant == "reference" and events:
                traces[(problem, variant)] = [decompose(dataclasses.replace(
                    p.timeline, event_call_us=tuple(events))) for p in parts]
    measured = load_measured(logs)
    out = []
    for problem in measured.problems():
        found = measured.for_problem(problem)
        try:
            inst = instantiate(load_task(problem), found[0].world_size, "pkb")
            comp = compare_problem(inst, topo, found, simulate_fixes=False)  # type: ignore[arg-type]
            mine = {v: parts for (p, v), parts in traces.items() if p == problem}
            out.append(dataclasses.replace(comp, timelines=timeline_comparisons(
                comp, topo, mine)))  # type: ignore[arg-type]
        except PkbsimError as exc:
            errors.append(f"{problem}: {exc.one_line()}")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("logs", nargs="+")
    parser.add_argument("--topology", required=True)
    parser.add_argument("--write", type=Path)
    parser.add_argument("--title", default="Where the measured time went (Kineto traces, W = 1)")
    args = parser.parse_args()
    topo = load_topology(args.topology)
    rows: list[list[str]] = []
    errors: list[str] = []
    sums: list[tuple[str, float]] = []
    inflation: list[float] = []
    term_pairs: dict[str, list[tuple[float, float]]] = {}
    for item in args.logs:
        logs_text, _, summary = item.partition(":")
        logs = Path(logs_text)
        try:
            comparisons = compare_folder(logs, Path(summary) if summary else None, topo, errors)
        except PkbsimError as exc:
            errors.append(exc.one_line())
            continue
        for c in comparisons:
            for t in c.timelines:
                rows.append(row(logs, c, t))
                if t.sum_error is not None:
                    sums.append((f"{c.problem}/{t.variant}", t.sum_error))
                pkb = pkb_timed_us(logs, c.problem, t.variant)
                if pkb and t.event_mean_us:
                    inflation.append(t.event_mean_us / pkb)
                if t.variant == "reference" and t.model is not None:
                    for term in set(t.measured.terms) | set(t.model.terms) | {"kernels"}:
                        if term.startswith("kernel:"):
                            continue
                        if term == "kernels":
                            pair = (kernels_us(t.measured.terms), kernels_us(t.model.terms))
                        else:
                            pair = (t.measured.terms.get(term, 0.0),
                                    t.model.terms.get(term, 0.0))
                        term_pairs.setdefault(term, []).append(pair)
                    if t.host_without_profiler_us is not None:
                        term_pairs.setdefault(HOST + " (profiler off, est.)", []).append(
                            (t.host_without_profiler_us, t.model.terms.get(HOST, 0.0)))
                    if pkb:
                        term_pairs.setdefault("call (PKB-timed, profiler off)", []).append(
                            (pkb, t.model.total_us))
    rows.sort(key=lambda r: (int(r[0].split("_", 1)[0]), r[1] != "reference", r[1]))
    within = [s for s in sums if abs(s[1]) <= SUM_TOLERANCE]
    lines = [f"# {args.title}", "",
             f"`python benchmarks/trace_breakdown_report.py {' '.join(map(str, args.logs))} "
             f"--topology {args.topology}` (this machine, {platform.machine()}, "
             f"{datetime.date.today()}; the GPU runs' device and date are in the console logs "
             "beside). Times in µs per call; `sum` is the sum of the trace's terms (the "
             "profiled calls' mean window); `vs events` its error against the same calls "
             "timed by CUDA events; `host, no profiler (est.)` is PKB's timed mean less the "
             "trace's other terms (the profiler adds host work; kernel and copy times are the "
             "GPU's own); `comm` includes waits on other ranks; `model` is "
             "`nccl_reference`'s predicted call on its reference model.", ""]
    lines += table(["problem", "variant", "PKB-timed", "events", "sum", "vs events", "host",
                    "host, no profiler (est.)", "sync", "comm", "kernels", "top kernel kinds",
                    "model"], rows)
    lines += ["", "## Summary", ""]
    if sums:
        worst = max(sums, key=lambda s: abs(s[1]))
        lines.append(f"- Terms' sum within {SUM_TOLERANCE:.0%} of the CUDA-event time: "
                     f"{len(within)} of {len(sums)} variants; largest |error| "
                     f"{abs(worst[1]):.1%} ({worst[0]}); median "
                     f"{statistics.median(s[1] for s in sums):+.2%}.")
    if inflation:
        lines.append(f"- Profiled call (CUDA events, profiler on) over PKB's timed mean "
                     f"(profiler off): median {statistics.median(inflation):.2f}x, range "
                     f"{min(inflation):.2f}x-{max(inflation):.2f}x over {len(inflation)}.")
    if term_pairs:
        lines += ["", "Per term, the model against the measurement over PKB's references "
                  "(µs per call; ratio only where both are above 0.1 µs):", ""]
        trows = []
        for term in sorted(term_pairs, key=term_key):
            pairs = term_pairs[term]
            diffs = [mo - me for me, mo in pairs]
            ratios = [mo / me for me, mo in pairs if me > 0.1 and mo > 0.1]
            trows.append([term, str(len(pairs)), f"{statistics.median(me for me, _ in pairs):.1f}",
                          f"{statistics.median(mo for _, mo in pairs):.1f}",
                          f"{statistics.median(diffs):+.1f}",
                          f"{statistics.median(ratios):.2f}" if ratios else "-",
                          str(len(ratios))])
        lines += table(["term", "references", "median measured", "median model",
                        "median model - measured", "median model / measured", "ratios"],
                       trows)
    twice: dict[str, list[list[str]]] = {}
    for r in rows:
        if r[1] == "reference":
            twice.setdefault(r[0], []).append(r)
    pairs = {k: v for k, v in twice.items() if len(v) >= 2}
    if pairs:
        lines += ["", "## References measured twice", "",
                  "The same reference in two of the folders (first and second, in the order "
                  "given): PKB-timed means, the traced calls' CUDA-event means and the traced "
                  "host term, and the second over the first.", ""]
        trows = []
        ratios: list[float] = []
        for k, (a, b) in sorted(((k, v[:2]) for k, v in pairs.items()),
                                key=lambda kv: int(kv[0].split("_", 1)[0])):
            ra = float(b[2]) / float(a[2]) if a[2] != "-" and b[2] != "-" else None
            if ra:
                ratios.append(ra)
            trows.append([k, a[2], b[2], "-" if ra is None else f"{ra:.2f}", a[3], b[3],
                          a[6], b[6]])
        lines += table(["problem", "PKB-timed 1", "PKB-timed 2", "2 / 1", "events 1",
                        "events 2", "host 1", "host 2"], trows)
        if ratios:
            lines += ["", f"PKB-timed, second over first: median {statistics.median(ratios):.2f}, "
                      f"range {min(ratios):.2f}-{max(ratios):.2f} over {len(ratios)}."]
    if errors:
        lines += ["", "## Not compared", ""] + [f"- {e}" for e in errors]
    text = "\n".join(lines) + "\n"
    if args.write:
        args.write.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
