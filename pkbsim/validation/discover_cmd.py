"""``pkbsim discover``: this machine's (or a captured) topology as a topology file (CLI glue).

Without ``--from`` it runs validate/discover_probe.py in a child process with a timeout; with
``--from`` it reads a validation run's results.json (its ``topology.discover`` case) or a file
holding the text of `nvidia-smi topo -m`. pkbsim.validation.discover does the parsing.
"""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pkbsim.errors import UsageError
from pkbsim.validation.discover import DiscoveryError

CASE_KEY = "topology.discover"
PROBE_SCRIPT = "discover_probe.py"
PROBE_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Capture:
    """What a topology is built from, and where it came from (for sources and errors)."""

    topo_text: str
    nvml: Any  # the probe's ``nvml`` object, or None
    host: str
    date: str
    file: str


def discover_command(out: Path | None, from_: Path | None, base: str | None,
                     name: str | None) -> None:
    from pkbsim.cli import check_writable, write_output
    from pkbsim.validation.discover import (
        build_topology,
        parse_nvml,
        parse_topo_matrix,
        render_yaml,
    )

    if out is not None:
        check_writable(out, "--out")
    capture = read_capture(from_) if from_ is not None else run_probe()
    matrix = parse_topo_matrix(capture.topo_text, capture.file)
    found = build_topology(matrix, parse_nvml(capture.nvml, capture.file), host=capture.host,
                           date=capture.date, base=base, name=name or _default_name(out, from_))
    write_output(render_yaml(found), out)
    if out is not None:
        up = found.data["scale_up"]
        sys.stdout.write(f"wrote {out}: {found.data['node']['gpus']} x "
                         f"{found.data['gpu']['model']}, {up['fabric']} fabric"
                         + (f" ({up['links_per_gpu']} NVLinks per GPU)"
                            if up["fabric"] == "nvswitch" else "")
                         + f", base {found.base}; {len(found.notes)} note(s) in its header\n")


def _default_name(out: Path | None, from_: Path | None) -> str | None:
    """The --out file's stem, else discovered-<captured file's stem> (else by host)."""
    if out is not None:
        return out.expanduser().stem
    return f"discovered-{from_.stem}" if from_ is not None else None


def read_capture(path: Path) -> Capture:
    """A results.json with a topology.discover case, the probe's output lines, or a saved
    `nvidia-smi topo -m`."""
    name = str(path)
    try:
        text = path.expanduser().read_text(errors="replace")
    except FileNotFoundError:
        raise UsageError(f"--from {path}: no such file") from None
    except OSError as exc:
        raise UsageError(f"--from {path}: cannot read ({exc.strerror})") from None
    first = text.lstrip().split("\n", 1)[0]
    if first.startswith('{"data"'):  # the probe's own output lines
        return capture_from_data(_merged_data(path.expanduser()), name)
    if first.startswith("{"):
        return _from_results(path)
    stamp = datetime.datetime.fromtimestamp(path.expanduser().stat().st_mtime,
                                            datetime.timezone.utc)
    return Capture(text, None, f"the host of {path.name}",
                   f"{stamp.date().isoformat()} (file time)", name)


def _from_results(path: Path) -> Capture:
    from pkbsim.validation.results import load

    run = load(path)
    case = next((c for c in run.cases if c.key == CASE_KEY), None)
    if case is None:
        raise DiscoveryError(f"no {CASE_KEY} case (run `pkbsim validate --cases "
                             f"{CASE_KEY}`)", file=run.file, field="cases")
    return capture_from_data(case.data, run.file, run.environment, case.error)


def capture_from_data(data: dict[str, Any], file: str, environment: dict[str, Any] | None = None,
                      error: str | None = None) -> Capture:
    """The probe's ``data`` (merged lines) as a capture; the run's environment fills gaps."""
    env = environment or {}
    text = data.get("topo_matrix")
    if not isinstance(text, str) or not text.strip():
        why = data.get("topo_error") or error or "no topo_matrix captured"
        raise DiscoveryError(f"no `nvidia-smi topo -m` text: {why}", file=file,
                             field=f"{CASE_KEY}.data.topo_matrix")
    host = data.get("hostname") or env.get("hostname") or "an unnamed host"
    date = data.get("date") or env.get("date") or "an unknown date"
    return Capture(text, data.get("nvml"), str(host), str(date), file)


def run_probe(timeout_s: float = PROBE_TIMEOUT_S) -> Capture:
    """Run discover_probe.py in a child process and read the line it writes."""
    from pkbsim.validation.runner import NO_MULTICAST, validate_dir

    script = validate_dir() / PROBE_SCRIPT
    if not script.is_file():
        raise DiscoveryError("no such script", file=str(script))
    with tempfile.TemporaryDirectory(prefix="pkbsim-discover-") as tmp:
        raw = Path(tmp) / "probe.jsonl"
        try:
            run = subprocess.run(
                [sys.executable, str(script), "--case", CASE_KEY, "--out", str(raw)],
                capture_output=True, text=True, timeout=timeout_s, check=False,
                stdin=subprocess.DEVNULL, env={**os.environ, **NO_MULTICAST})
        except subprocess.TimeoutExpired:
            raise DiscoveryError(f"timed out after {timeout_s:g} s", file=str(script)) from None
        data = _merged_data(raw)
    if run.returncode != 0:
        tail = " ".join(run.stderr.strip().splitlines()[-3:]) or f"exit {run.returncode}"
        raise DiscoveryError(f"could not capture the topology: {tail}", file=str(script))
    return capture_from_data(data, str(script))


def _merged_data(path: Path) -> dict[str, Any]:
    """The ``data`` objects of the probe's lines, merged; unreadable lines are skipped."""
    data: dict[str, Any] = {}
    if not path.is_file():
        return data
    for line in path.read_text(errors="replace").splitlines():
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict) and isinstance(obj.get("data"), dict):
            data.update(obj["data"])
    return data
