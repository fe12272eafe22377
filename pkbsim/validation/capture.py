"""What a discovered topology is built from: a probe of this machine's GPUs (validate/
discover_probe.py in a child process with a timeout), or a capture read back from a file (a
validation run's results.json with its ``topology.discover`` case, the probe's own output lines,
or a saved `nvidia-smi topo -m`)."""

from __future__ import annotations

import datetime
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pkbsim.datafiles import validate_dir
from pkbsim.errors import UsageError
from pkbsim.inputs import loads_json, read_text
from pkbsim.processes import run_short
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


def read_capture(path: Path) -> Capture:
    """A results.json with a topology.discover case, the probe's output lines, or a saved
    `nvidia-smi topo -m`."""
    name = str(path)
    try:
        text = read_text(path.expanduser())
    except UsageError as exc:
        raise UsageError(f"--from {path}: {exc.message}") from None
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
    script = validate_dir() / PROBE_SCRIPT
    if not script.is_file():
        raise DiscoveryError("no such script", file=str(script))
    with tempfile.TemporaryDirectory(prefix="pkbsim-discover-") as tmp:
        raw = Path(tmp) / "probe.jsonl"
        try:
            run = run_short([sys.executable, str(script), "--case", CASE_KEY, "--out", str(raw)],
                            timeout_s)
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
    for line in read_text(path).splitlines():
        try:
            obj = loads_json(line)
        except UsageError:
            continue
        if isinstance(obj, dict) and isinstance(obj.get("data"), dict):
            data.update(obj["data"])
    return data
