"""``pkbsim inspect`` rendered: a table with the evidence lines, or JSON (schema
``pkbsim.inspect/1``) with every finding's (line, snippet) evidence. A call site the size rule
makes metadata carries its bound (``elements``, ``dtype``: optional fields of the schema)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.table import Table

from pkbsim import __version__
from pkbsim.files import json_text
from pkbsim.inspection import Inspection
from pkbsim.inspection.call_sites import CallSite
from pkbsim.inspection.vocab import FLAGS
from pkbsim.report.text import to_text

SCHEMA = "pkbsim.inspect/1"


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
        "profile": row.profile,
        "call_sites": [_site(c) for c in row.call_sites],
    }


def _site(c: CallSite) -> dict[str, Any]:
    """A call site; ``elements`` and ``dtype`` (optional) where the size rule bounds it."""
    out: dict[str, Any] = {"line": c.line, "call": c.call, "kind": c.kind, "path": c.path,
                           "condition": c.condition, "source": c.source, "snippet": c.snippet}
    if c.elements is not None:
        out["elements"] = c.elements
        out["dtype"] = c.dtype
    return out


def rows_dict(rows: list[Inspection]) -> dict[str, Any]:
    """The whole document of ``--format json``."""
    return {"schema": SCHEMA, "pkbsim_version": __version__,
            "files": [to_dict(r) for r in rows]}


def render_json(rows: list[Inspection]) -> str:
    return json_text(rows_dict(rows), indent=1) + "\n"


def render_table(rows: list[Inspection]) -> str:
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
    lines += _sites(rows, names)
    return to_text(table) + "\n".join(lines) + "\n"


def _sites(rows: list[Inspection], names: list[str]) -> list[str]:
    """Every call that moves data, with its path and the condition that decides it."""
    shown = [(row, name) for row, name in zip(rows, names, strict=True) if row.call_sites]
    if not shown:
        return []
    out = ["", f"Call sites (under {shown[0][0].profile}; line 0: found by the profiler)"]
    for row, name in shown:
        if len(rows) > 1:
            out.append(f"  {name}")
        for c in row.call_sites:
            why = f"  [{c.condition}]" if c.condition else ""
            size = f" ({c.size})" if c.size else ""
            out.append(f"    line {c.line:>4}  {c.path:8} {c.kind:13} {c.call}{size}{why}")
    return out


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
