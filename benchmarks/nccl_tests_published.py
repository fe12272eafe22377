"""The model against published nccl-tests results: median |error| per regime, collective and
machine (issue 18's error report).

    python benchmarks/nccl_tests_published.py [--data tests/data/nccl_tests] [--jobs N]
        [--rows] [--write docs/measurements/nccl_tests_published.md]

Each table in tests/data/nccl_tests is a public nccl-tests output (its URL, hardware and NCCL
version are in the file), transcribed as printed, with the shipped topology that describes the
machine. Every row is predicted by the simulator's nccl_reference with the nccl-tests host model
(pkbsim.validation.published); nothing is fitted to these tables. Error = (predicted -
measured) / measured on nccl-tests' time column. ``--write`` puts the report in a Markdown file
whose block tests/validation/test_published.py checks is current.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from pkbsim.errors import PkbsimError
from pkbsim.validation.published import REGIMES, Row, load_tables, predict_all, summarize

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests/data/nccl_tests"
BEGIN, END = "<!-- report:begin -->", "<!-- report:end -->"


def report(rows: list[Row], with_rows: bool = False) -> str:
    lines = []
    failed = [r for r in rows if r.predicted_us is None]
    ok = [r for r in rows if r.predicted_us is not None]
    tables = {(r.table.file, r.table.kind, r.table.world_size) for r in rows}
    lines.append(f"{len(ok)} rows predicted from {len({r.table.file for r in rows})} sources "
                 f"({len(tables)} tables); {len(failed)} not predicted.")
    for by, title in (("all", "All rows"), ("regime", "By message size (nccl-tests' size)"),
                      ("kind", "By collective (rows of 1 MiB and over)"),
                      ("machine", "By machine (rows of 1 MiB and over)"),
                      ("file", "By source (all rows)")):
        subset = ok if by in ("all", "regime", "file") else [r for r in ok
                                                            if r.size_bytes >= 2**20]
        lines += ["", f"**{title}**", "",
                  "| group | rows | median abs error | within 25% | median signed error |",
                  "|---|---:|---:|---:|---:|"]
        for s in summarize(subset, by=by):
            lines.append(f"| {s.group} | {s.rows} | {s.median_abs:.0%} | {s.within_25:.0%} | "
                         f"{s.signed_median:+.0%} |")
    for regime in (name for _lo, _hi, name in REGIMES):
        lines += ["", f"**{regime}, by collective**", "",
                  "| collective | rows | median abs error | median signed error |",
                  "|---|---:|---:|---:|"]
        for s in summarize([r for r in ok if r.regime == regime], by="kind"):
            lines.append(f"| {s.group} | {s.rows} | {s.median_abs:.0%} | "
                         f"{s.signed_median:+.0%} |")
    two_node = [r for r in ok if r.table.kind == "all_reduce" and "x" in r.table.machine
                and r.table.machine.split()[1] == "2" and r.size_bytes >= 2**30]
    if two_node:
        lines += ["", "**Two-node all-reduce at 1 GiB and over**", "",
                  "| source | size | measured us | predicted us | error |",
                  "|---|---:|---:|---:|---:|"]
        for r in two_node:
            lines.append(f"| {Path(r.table.file).name} | {r.size_bytes:.0f} | "
                         f"{r.measured_us:.1f} | {r.predicted_us:.1f} | {r.rel_error:+.0%} |")
    if failed:
        lines += ["", "**Not predicted**", ""]
        lines += sorted({f"- {Path(r.table.file).name}: {r.error}" for r in failed})
    if with_rows:
        lines += ["", "| source | collective | W | size | measured us | predicted us | error |",
                  "|---|---|---:|---:|---:|---:|---:|"]
        for r in ok:
            lines.append(f"| {Path(r.table.file).name} | {r.table.kind} | {r.table.world_size} "
                         f"| {r.size_bytes:.0f} | {r.measured_us:.2f} | {r.predicted_us:.2f} | "
                         f"{r.rel_error:+.0%} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--rows", action="store_true", help="also print every row")
    ap.add_argument("--write", help="replace the report block of this Markdown file")
    args = ap.parse_args()
    try:
        tables = load_tables(args.data)
    except PkbsimError as exc:
        print(f"nccl_tests_published: error: {exc.one_line()}", file=sys.stderr)
        raise SystemExit(2) from None
    rows = predict_all(tables, args.jobs)
    text = report(rows, args.rows)
    print(text, end="")
    if args.write:
        path = Path(args.write)
        doc = path.read_text()
        head, _, rest = doc.partition(BEGIN)
        _, _, tail = rest.partition(END)
        path.write_text(f"{head}{BEGIN}\n{report(rows)}{END}{tail}")


if __name__ == "__main__":
    main()
