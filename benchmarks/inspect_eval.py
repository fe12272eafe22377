"""How well ``pkbsim inspect`` places data-moving call sites: precision, recall and F1 per label.

    python benchmarks/inspect_eval.py [DIR] [--labels FILE] [--write OUT.md]

DIR (default ``tests/data/inspect_eval``) holds solution files whose expected call sites are
comments on their lines: ``# expect: <kind> <path>[; <kind> <path>]``, with an optional header
``# profile: dtype=float32 world_size=1`` (the rules: that folder's README). ``--labels FILE``
takes the expectations from a file instead (``FILE LINE KIND PATH`` per line, ``#`` comments),
for solutions that cannot be annotated, such as PKB's own examples.

A call site is (file, line, kind). Three tables:

- **path**: per path label (hot, setup, fallback, unknown), over every site expected or found:
  TP = expected and found with that label; FP = found with it, expected otherwise or not at all;
  FN = expected with it, found otherwise or not at all.
- **kind**: per kind, whether the site is found at all (path ignored).
- **mechanism on the hot path**: per file, is ``nccl_payload`` / ``copy_engine`` among the
  mechanisms ``inspect`` reports (expected: some site of that kind is hot).

Every mismatch is listed below the tables. Deterministic; no GPU.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pkbsim.inspection import inspect_file  # noqa: E402
from pkbsim.inspection.call_sites import CALL_KINDS  # noqa: E402
from pkbsim.inspection.profile import Profile  # noqa: E402
from pkbsim.inspection.python_model import PATHS  # noqa: E402

DEFAULT_DIR = ROOT / "tests" / "data" / "inspect_eval"
EXPECT = re.compile(r"#\s*expect:\s*(.+?)\s*$")
PROFILE = re.compile(r"^#\s*profile:\s*(.+?)\s*$")
HOT_MECHANISMS = ("nccl_payload", "copy_engine")
NONE = "-"


@dataclass(frozen=True)
class Case:
    file: Path
    profile: Profile
    expected: dict[tuple[int, str], str]  # (line, kind) -> path


def fail(message: str) -> SystemExit:
    sys.stderr.write(f"inspect_eval: {message}\n")
    return SystemExit(2)


def annotated(path: Path) -> Case:
    expected: dict[tuple[int, str], str] = {}
    settings: dict[str, str] = {}
    for number, text in enumerate(path.read_text().splitlines(), start=1):
        header = PROFILE.match(text)
        if header:
            settings = dict(part.split("=", 1) for part in header.group(1).split())
        found = EXPECT.search(text)
        if found:
            for item in found.group(1).split(";"):
                words = item.split()
                if len(words) != 2 or words[0] not in CALL_KINDS or words[1] not in PATHS:
                    raise fail(f"{path}: line {number}: expected '# expect: KIND PATH', "
                               f"KIND in {CALL_KINDS}, PATH in {PATHS}; got {item.strip()!r}")
                expected[(number, words[0])] = words[1]
    try:
        profile = Profile(dtype=settings.get("dtype", "bfloat16"),
                          world_size=int(settings.get("world_size", "8")))
    except ValueError as exc:
        raise fail(f"{path}: field profile: {exc}") from None
    return Case(path, profile, expected)


def labelled(folder: Path, labels: Path) -> list[Case]:
    by_file: dict[str, dict[tuple[int, str], str]] = {}
    for number, text in enumerate(labels.read_text().splitlines(), start=1):
        text = text.split("#", 1)[0].strip()
        if not text:
            continue
        words = text.split()
        if len(words) == 1:
            by_file.setdefault(words[0], {})
            continue
        if len(words) != 4 or not words[1].isdigit() or words[2] not in CALL_KINDS or \
                words[3] not in PATHS:
            raise fail(f"{labels}: line {number}: expected 'FILE LINE KIND PATH'")
        by_file.setdefault(words[0], {})[(int(words[1]), words[2])] = words[3]
    cases = []
    for name, expected in sorted(by_file.items()):
        if not (folder / name).is_file():
            raise fail(f"{labels}: {name}: not a file in {folder}")
        cases.append(Case(folder / name, Profile(), expected))
    return cases


def score(cases: list[Case]) -> tuple[dict[str, Counter[str]], list[str], int]:
    """Counts per table row ("path:hot", "kind:copy_engine", "mechanism:nccl_payload") and
    the mismatches."""
    counts: dict[str, Counter[str]] = {}
    misses: list[str] = []
    sites = 0

    def count(row: str, outcome: str) -> None:
        counts.setdefault(row, Counter())[outcome] += 1

    for case in cases:
        row = inspect_file(case.file, case.profile)
        found = {(s.line, s.kind): s.path for s in row.call_sites}
        name = case.file.name
        for key in sorted(set(found) | set(case.expected)):
            sites += 1
            want, got = case.expected.get(key, NONE), found.get(key, NONE)
            for label in PATHS:
                if want == label and got == label:
                    count(f"path:{label}", "tp")
                elif got == label:
                    count(f"path:{label}", "fp")
                elif want == label:
                    count(f"path:{label}", "fn")
            kind = key[1]
            if want != NONE and got != NONE:
                count(f"kind:{kind}", "tp")
            elif got != NONE:
                count(f"kind:{kind}", "fp")
            else:
                count(f"kind:{kind}", "fn")
            if want != got:
                why = next((s.condition for s in row.call_sites if (s.line, s.kind) == key), "")
                misses.append(f"{name}:{key[0]} {kind}: expected {want}, found {got}"
                              + (f" [{why}]" if why else ""))
        for mech in HOT_MECHANISMS:
            want_m = any(k == mech and p == "hot" for (_, k), p in case.expected.items())
            got_m = mech in row.mechanisms
            outcome = ("tp" if want_m and got_m else "fp" if got_m else "fn" if want_m
                       else "tn")
            count(f"mechanism:{mech}", outcome)
            if want_m != got_m:
                misses.append(f"{name}: mechanisms: {mech} expected {want_m}, found {got_m}")
    return counts, misses, sites


def f1(c: Counter[str]) -> tuple[float | None, float | None, float | None]:
    """Precision, recall, F1; None where undefined (nothing expected or found)."""
    p = c["tp"] / (c["tp"] + c["fp"]) if c["tp"] + c["fp"] else None
    r = c["tp"] / (c["tp"] + c["fn"]) if c["tp"] + c["fn"] else None
    if p is None and r is None:
        return None, None, None
    p, r = p if p is not None else 0.0, r if r is not None else 0.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def report(cases: list[Case], source: str) -> str:
    counts, misses, sites = score(cases)
    lines = [f"Inspection against hand labels: {len(cases)} files, {sites} call sites "
             f"({source})", ""]
    for table, title in (("path", "path of each call site"), ("kind", "call sites found"),
                         ("mechanism", "mechanism on the hot path (per file)")):
        lines += [f"### {title}", "", "| label | expected | found | TP | FP | FN | precision "
                  "| recall | F1 |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for row in sorted(k for k in counts if k.startswith(f"{table}:")):
            c = counts[row]
            p, r, f = f1(c)
            lines.append(f"| {row.split(':', 1)[1]} | {c['tp'] + c['fn']} | {c['tp'] + c['fp']} "
                         f"| {c['tp']} | {c['fp']} | {c['fn']} | {_fmt(p)} | {_fmt(r)} | "
                         f"{_fmt(f)} |")
        lines.append("")
    scored = [(f, row) for row, c in counts.items() if (f := f1(c)[2]) is not None]
    worst = min(scored) if scored else None
    lines += [f"Lowest F1: {worst[0]:.3f} ({worst[1]})." if worst else "No F1 defined.", "",
              f"Mismatches ({len(misses)}):" if misses else "Mismatches: none."]
    lines += [f"- {m}" for m in misses]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--labels", type=Path, help="FILE LINE KIND PATH per line")
    parser.add_argument("--write", type=Path, help="also write the report to this file")
    args = parser.parse_args(argv)
    if not args.folder.is_dir():
        raise fail(f"{args.folder}: not a folder")
    if args.labels is not None:
        cases = labelled(args.folder, args.labels)
        labels = args.labels.resolve()
        source = "labels " + (str(labels.relative_to(ROOT)) if labels.is_relative_to(ROOT)
                              else labels.name)
    else:
        cases = [annotated(p) for p in sorted(args.folder.glob("*.py"))]
        folder = args.folder.resolve()
        source = "annotated files in " + (str(folder.relative_to(ROOT)) if folder.is_relative_to(
            ROOT) else folder.name)
    if not cases:
        raise fail(f"{args.folder}: no solution files")
    text = report(cases, source)
    sys.stdout.write(text)
    if args.write is not None:
        args.write.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
