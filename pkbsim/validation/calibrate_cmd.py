"""``pkbsim calibrate``: fit a topology to a validation run and write it (CLI glue)."""

from __future__ import annotations

import math
from pathlib import Path

import typer
from rich.table import Table

from pkbsim.validation.calibrate import Calibration, field_value


def calibrate_command(results: Path, out: Path, base: str | None, name: str | None) -> None:
    from pkbsim.cli import check_writable, write_output
    from pkbsim.topology import load_topology
    from pkbsim.validation.bases import base_for_gpu
    from pkbsim.validation.calibrate import calibrate
    from pkbsim.validation.results import load

    check_writable(out, "--out")
    run = load(results)
    base_topo = load_topology(base or base_for_gpu(run.environment.get("gpu_name")))
    cal = calibrate(run, base_topo)
    write_output(cal.to_yaml(name or out.expanduser().stem), out)
    typer.echo(summary(cal, out))


def summary(cal: Calibration, out: Path) -> str:
    """What was fitted (base value, fitted value, source op) and what was skipped."""
    from pkbsim.report.table import to_text

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
