"""``pkbsim validate``: list the cases, run them with progress and a summary table, or (with
``--report DIR``) the model's error against a run.

Exit code 0 when every case that ran is ok or waived and at least one was measured, 1 when one
failed or timed out, 2 for a bad option, 3 when nothing was measured (every case waived: no GPU
here, too few, multicast not allowed) unless --allow-no-gpu, 130 on Ctrl-C or SIGTERM (the
cases done are kept). SystemExit, not typer.Exit:
typer returns the latter's code from a non-standalone app, where the entry point drops it.
"""

from __future__ import annotations

import hashlib
import shlex
import sys
from pathlib import Path
from typing import Annotated

import typer

from pkbsim import bounds
from pkbsim.cli.options import number_option
from pkbsim.cli.output import check_writable, write_output
from pkbsim.errors import UsageError
from pkbsim.inputs import path_kind

REPORT_FILES = ("report.json", "report.md", "predicted_vs_measured.png")
NOTHING_MEASURED = 3  # the exit code when every case was waived


def validate(
    gpus: Annotated[int | None, number_option(
        "gpus", "Use at most N GPUs (default: all present). Cases needing more are waived.")]
        = None,
    quick: Annotated[bool, typer.Option(
        "--quick", help="Fewer sizes and repeats: the whole suite in a few minutes.")] = False,
    cases: Annotated[str | None, typer.Option(
        help="Only cases whose key matches one of these comma-separated glob patterns "
             "(e.g. 'hbm.*,launch.*').")] = None,
    out: Annotated[Path, typer.Option(
        help="Folder for results.json and each case's log.")] = Path("validation"),
    report: Annotated[Path | None, typer.Option(
        help="Do not measure: compare DIR/results.json with the simulator's predictions on "
             "the uncalibrated (--base) and calibrated topology, and write DIR/report.*.")]
        = None,
    base: Annotated[str | None, typer.Option(
        help="With --report: the uncalibrated topology (default: chosen by GPU name).")] = None,
    calibrated: Annotated[Path | None, typer.Option(
        help="With --report: a calibrated topology file (default: calibrate from the "
             "results in memory).")] = None,
    allow_multicast: Annotated[bool, typer.Option(
        "--allow-multicast", help="Run cases that use NVLink multicast (NVLS). Off by "
                                  "default: multicast can disrupt a shared node.")] = False,
    timeout: Annotated[float | None, number_option(
        "seconds", "Seconds each case may run (default: each case's own limit).")] = None,
    nnodes: Annotated[int, number_option(
        "nodes", "Nodes for torchrun cases (multi-node: run this on every node).")] = 1,
    rdzv_endpoint: Annotated[str | None, typer.Option(
        help="HOST:PORT of torchrun's c10d rendezvous, for --nnodes > 1.")] = None,
    list_cases: Annotated[bool, typer.Option(
        "--list", help="List the cases and exit.")] = False,
    allow_no_gpu: Annotated[bool, typer.Option(
        "--allow-no-gpu", help="Exit 0 even when nothing was measured (every case waived: no "
                               "GPU here, or too few); without it that is exit code 3.")]
        = False,
) -> None:
    """Measure this machine's GPUs (HBM, launches, host copies, peers, NCCL), each case in a
    child process with a timeout; or, with --report, the model's error against a run."""
    if report is not None:
        error_report(report, base, calibrated)
        return
    run_cases(gpus=gpus, quick=quick, patterns=cases, out=out,
              allow_multicast=allow_multicast, timeout_s=timeout, nnodes=nnodes,
              rdzv_endpoint=rdzv_endpoint, list_only=list_cases, allow_no_gpu=allow_no_gpu)


def run_cases(*, gpus: int | None, quick: bool, patterns: str | None, out: Path,
              allow_multicast: bool, timeout_s: float | None, nnodes: int,
              rdzv_endpoint: str | None, list_only: bool, allow_no_gpu: bool = False) -> None:
    from pkbsim.cli.progress import CaseProgress
    from pkbsim.cli.signals import sigterm_as_interrupt
    from pkbsim.report.validation_run import case_table, summary
    from pkbsim.validation.cases import select
    from pkbsim.validation.runner import run_suite

    check_options(gpus, timeout_s, nnodes, rdzv_endpoint)
    selected = select(patterns)
    if list_only:
        write_output(case_table(selected), None)
        return
    command = command_line(gpus, quick, patterns, out, allow_multicast, timeout_s, nnodes,
                           rdzv_endpoint)
    progress = CaseProgress(selected)
    try:
        with sigterm_as_interrupt():
            results = run_suite(selected, out, gpus, quick, allow_multicast, timeout_s, nnodes,
                                rdzv_endpoint, progress.on_event, command=command)
    except KeyboardInterrupt:  # the runner has written the cases done and killed the child
        progress.stop()
        sys.stderr.write(f"pkbsim: interrupted; the cases done so far are in "
                         f"{out / 'results.json'}\n")
        raise SystemExit(130) from None
    finally:
        progress.stop()
    ran = {case.key for case in selected}
    write_output(summary(results, ran), None)
    statuses = [c for c in results.cases if c.key in ran]
    if any(c.status in ("failed", "timeout") for c in statuses):
        raise SystemExit(1)
    if statuses and all(c.status == "waived" for c in statuses) and not allow_no_gpu:
        gpus_found = results.environment.get("gpu_count") or 0
        sys.stderr.write(f"pkbsim: nothing was measured: all {len(statuses)} cases were waived "
                         f"({gpus_found} GPUs here; the first: {statuses[0].error}); "
                         "pass --allow-no-gpu to accept that (exit 0)\n")
        raise SystemExit(NOTHING_MEASURED)


def check_options(gpus: int | None, timeout_s: float | None, nnodes: int,
                  rdzv_endpoint: str | None) -> None:
    if gpus is not None:
        bounds.check_option(gpus, "gpus", "--gpus")
    if timeout_s is not None:
        bounds.check_option(timeout_s, "seconds", "--timeout")
    bounds.check_option(nnodes, "nodes", "--nnodes")
    if nnodes > 1 and not rdzv_endpoint:
        raise UsageError(f"--nnodes {nnodes}: needs --rdzv-endpoint HOST:PORT (the same on "
                         "every node)")
    if rdzv_endpoint is not None:
        if nnodes == 1:
            raise UsageError("--rdzv-endpoint: only used with --nnodes 2 or more")
        host, _, port = rdzv_endpoint.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise UsageError(f"--rdzv-endpoint {rdzv_endpoint!r}: expected HOST:PORT")


def command_line(gpus: int | None, quick: bool, patterns: str | None, out: Path,
                 allow_multicast: bool, timeout_s: float | None, nnodes: int,
                 rdzv_endpoint: str | None) -> str:
    """The pkbsim command these options stand for (recorded in results.json)."""
    args = ["pkbsim", "validate"]
    args += ["--gpus", str(gpus)] if gpus is not None else []
    args += ["--quick"] if quick else []
    args += ["--cases", patterns] if patterns is not None else []
    args += ["--out", str(out)]
    args += ["--allow-multicast"] if allow_multicast else []
    args += ["--timeout", f"{timeout_s:g}"] if timeout_s is not None else []
    args += ["--nnodes", str(nnodes), "--rdzv-endpoint", str(rdzv_endpoint)] if nnodes > 1 \
        else []
    return shlex.join(args)


def error_report(dir_: Path, base: str | None, calibrated: Path | None) -> None:
    """``--report DIR``: DIR/results.json (only read) against the base topology (``--base``,
    else the shipped one for the run's GPU) and the calibrated one (``--calibrated FILE``,
    else fitted in memory); DIR/report.json, report.md and the plot written atomically; the
    summary printed."""
    from pkbsim.report import validation_report as vr
    from pkbsim.topology import load_topology
    from pkbsim.validation.bases import base_for_gpu
    from pkbsim.validation.calibrate import calibrate
    from pkbsim.validation.error_report import build_report
    from pkbsim.validation.results import load

    folder = dir_.expanduser()
    if path_kind(folder, name=f"--report {dir_}") != "folder":
        raise UsageError(f"--report {dir_}: not a folder (expected one holding results.json)")
    results = load(folder / "results.json")
    for name in REPORT_FILES:  # fail before any work
        check_writable(folder / name, "--report")
    base_topo = load_topology(base or base_for_gpu(results.environment.get("gpu_name")))
    cal_topo = (load_topology(str(calibrated)) if calibrated is not None
                else calibrate(results, base_topo).topology)
    report = build_report(results, base_topo, cal_topo, _sha256(Path(results.file)))
    outputs: dict[str, str | bytes] = {
        "report.json": vr.render_json(report), "report.md": vr.render_markdown(report),
        "predicted_vs_measured.png": vr.plot(report, "png")}
    for name, data in outputs.items():
        write_output(data, folder / name, "--report")
    write_output(vr.render_table(report), None)
    write_output(f"Wrote {', '.join(REPORT_FILES)} in {dir_}\n", None)


def _sha256(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""
