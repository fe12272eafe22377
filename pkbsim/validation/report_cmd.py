"""``pkbsim validate --report DIR``: the model's error against a validation run (CLI glue).

Loads DIR/results.json, the uncalibrated topology (``--base``, else the shipped one for the
run's GPU) and the calibrated one (``--calibrated FILE``, else fitted in memory), builds the
report, writes DIR/report.json, DIR/report.md and DIR/predicted_vs_measured.png atomically and
prints the summary table. results.json is only read.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from pkbsim.errors import UsageError
from pkbsim.topology.schema import Topology
from pkbsim.validation.results import Results

OUTPUTS = ("report.json", "report.md", "predicted_vs_measured.png")


def report_command(dir_: Path, base: str | None, calibrated: Path | None) -> None:
    from pkbsim.cli import check_writable, write_output
    from pkbsim.report import validation_report as vr
    from pkbsim.topology import load_topology
    from pkbsim.validation.bases import base_for_gpu
    from pkbsim.validation.results import load

    folder = dir_.expanduser()
    if not folder.is_dir():
        raise UsageError(f"--report {dir_}: not a folder (expected one holding results.json)")
    results = load(folder / "results.json")
    for name in OUTPUTS:  # fail before any work
        check_writable(folder / name, "--report")
    base_topo = load_topology(base or base_for_gpu(results.environment.get("gpu_name")))
    cal_topo = (load_topology(str(calibrated)) if calibrated is not None
                else _calibrate(results, base_topo))
    report = vr.build_report(results, base_topo, cal_topo, _sha256(Path(results.file)))
    outputs: dict[str, str | bytes] = {
        "report.json": vr.render_json(report), "report.md": vr.render_markdown(report),
        "predicted_vs_measured.png": vr.plot(report, "png")}
    for name, data in outputs.items():
        write_output(data, folder / name, "--report")
    write_output(vr.render_table(report), None)
    write_output(f"Wrote {', '.join(OUTPUTS)} in {dir_}\n", None)


def _calibrate(results: Results, base: Topology) -> Topology:
    """The calibrated topology fitted in memory (pkbsim calibrate without a file)."""
    from pkbsim.validation.calibrate import calibrate

    return calibrate(results, base).topology


def _sha256(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""
