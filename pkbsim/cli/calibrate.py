"""``pkbsim calibrate``: fit a topology to a validation run and write it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pkbsim.cli.output import check_writable, write_output


def calibrate(
    results: Annotated[Path, typer.Argument(help="A validation run's results.json (or its "
                                                 "folder).")],
    out: Annotated[Path, typer.Option(help="Topology file to write (.yaml).")],
    base: Annotated[str | None, typer.Option(
        help="Topology whose unmeasured parameters are kept (default: chosen by GPU "
             "name).")] = None,
    name: Annotated[str | None, typer.Option(
        help="Name of the new topology (default: the --out file's stem).")] = None,
) -> None:
    """Fit latency, bandwidth and efficiency per mechanism to a validation run and write a
    topology file that says where each fitted number came from."""
    from pkbsim.report.calibration_report import summary
    from pkbsim.topology import load_topology
    from pkbsim.validation.bases import base_for_gpu
    from pkbsim.validation.calibrate import calibrate as fit
    from pkbsim.validation.results import load

    check_writable(out, "--out")
    run = load(results)
    base_topo = load_topology(base or base_for_gpu(run.environment.get("gpu_name")))
    cal = fit(run, base_topo)
    write_output(cal.to_yaml(name or out.expanduser().stem), out)
    write_output(summary(cal, out) + "\n", None)
