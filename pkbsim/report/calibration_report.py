"""``pkbsim calibrate`` rendered: what was fitted (base value, fitted value with its error,
the op it came from) and what was kept or skipped."""

from __future__ import annotations

import math
from pathlib import Path

from rich.table import Table

from pkbsim.report.text import to_text
from pkbsim.validation.calibrate import Calibration, field_value


def summary(cal: Calibration, out: Path) -> str:
    """What was fitted (base value, fitted value, source op) and what was skipped."""
    if not cal.fields:
        head = (f"Nothing could be fitted from {cal.results_file}: {out} keeps every value of "
                f"{cal.base.name} ({len(cal.kept)} fields, each marked 'not measured here').")
    else:
        head = (f"Wrote {out}: {len(cal.fields)} field(s) fitted from {cal.results_file}, "
                f"{len(cal.kept)} kept from {cal.base.name}.")
    parts: list[object] = [head]
    if cal.fields:
        table = Table(title="Fitted (1-sigma errors)", title_justify="left", show_edge=False,
                      pad_edge=False)
        for col in ("field", "base", "fitted", "op", "points", "rel rms"):
            table.add_column(col)
        for path, f in cal.fields.items():
            err = "" if math.isnan(f.err) else f" ± {f.err:.2g}"
            table.add_row(path, f"{field_value(cal.base, path):g}", f"{f.value:g}{err} {f.unit}",
                          f.op, str(f.points), f"{100 * f.rel_rms:.2g}%")
        parts.append(table)
    parts += [f"skipped {path}: {why}" for path, why in cal.skipped.items()]
    parts += [f"note: {note}" for note in cal.notes]
    return to_text(*parts).rstrip("\n")
