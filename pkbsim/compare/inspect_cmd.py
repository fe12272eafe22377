"""``pkbsim inspect FILE|DIR``: what each solution file does, as a table or JSON (CLI glue).

pkbsim.compare.inspect does the reading; this module renders and writes. A missing path, or a
lone file that cannot be read or parsed, is an error (exit 2); in a folder such a file becomes a
row with its error, the others are still inspected, and stderr says how many failed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from rich.table import Table

from pkbsim import __version__
from pkbsim.compare.inspect import Inspection, inspect_path
from pkbsim.compare.vocab import FLAGS
from pkbsim.errors import UsageError

SCHEMA = "pkbsim.inspect/1"
FORMATS = ("table", "json")


def inspect_command(paths: list[Path], fmt: str, out: Path | None) -> None:
    from pkbsim.cli import check_writable, write_output

    if fmt not in FORMATS:
        raise UsageError(f"--format {fmt}: expected one of {', '.join(FORMATS)}")
    if out is not None:
        check_writable(out, "--out")
    if not paths:
        raise UsageError("give at least one solution file or folder")
    rows = [row for path in paths for row in inspect_path(path)]
    write_output(render_json(rows) if fmt == "json" else render_table(rows), out)
    failed = [r for r in rows if r.error is not None]
    if failed:
        sys.stderr.write(f"{len(failed)} of {len(rows)} file(s) could not be inspected: "
                         + "; ".join(r.error or "" for r in failed) + "\n")


def to_dict(row: Inspection) -> dict[str, Any]:
    return {
        "file": row.file,
        "mechanisms": list(row.mechanisms),
        "nccl_on_hot_path": list(row.nccl_on_hot_path),
        "custom_kernels": row.custom_kernels,
        **row.flags,
        "evidence": {name: [[line, text] for line, text in lines]
                     for name, lines in row.evidence.items()},
        "notes": list(row.notes),
        "error": row.error,
    }


def render_json(rows: list[Inspection]) -> str:
    data = {"schema": SCHEMA, "pkbsim_version": __version__,
            "files": [to_dict(r) for r in rows]}
    return json.dumps(data, indent=1) + "\n"


def render_table(rows: list[Inspection]) -> str:
    from pkbsim.report.table import to_text

    table = Table(title="Static inspection (evidence: file line numbers)", title_justify="left",
                  show_edge=False, pad_edge=False)
    for name in ("file", "mechanisms", "NCCL on hot path", "kernels", "flags set"):
        table.add_column(name, justify="right" if name == "kernels" else "left")
    names = _short_names(rows)
    for row, name in zip(rows, names, strict=True):
        if row.error is not None:
            table.add_row(name, f"error: {row.error}", "", "", "")
            continue
        table.add_row(name, ", ".join(row.mechanisms) or "-",
                      ", ".join(row.nccl_on_hot_path) or "-", str(row.custom_kernels),
                      ", ".join(f for f in FLAGS if row.flags[f]) or "-")
    lines = ["", "Evidence (name: lines)"] if len(rows) > 1 else ["", "Evidence"]
    for row, name in zip(rows, names, strict=True):
        if row.error is not None:
            continue
        if len(rows) > 1:
            found = "; ".join(f"{k}: {', '.join(str(n) for n, _ in v)}"
                              for k, v in row.evidence.items())
            lines.append(f"  {name}: {found or '-'}")
        else:
            lines += [f"  {k:22} line {n:>4}: {text}" for k, v in row.evidence.items()
                      for n, text in v]
        lines += [f"  note: {note}" for note in row.notes]
    return to_text(table) + "\n".join(lines) + "\n"


def _short_names(rows: list[Inspection]) -> list[str]:
    """File names relative to the folder they share (the full path for one file)."""
    paths = [Path(r.file) for r in rows]
    if len(paths) < 2:
        return [str(p) for p in paths]
    parents = [p.parent.parts for p in paths]
    common = 0
    while all(len(p) > common and p[common] == parents[0][common] for p in parents):
        common += 1
    return [str(Path(*p.parts[common:])) for p in paths]
