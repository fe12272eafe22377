"""validate/pkb_references.py: many references timed in one torchrun job, on CPU with gloo."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from paths import ROOT

TINY = ROOT / "tests" / "data" / "pkb_tiny"


@pytest.mark.slow
def test_references_are_timed_in_pkb_format(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    summary = tmp_path / "summary.json"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
           "2", str(ROOT / "validate" / "pkb_references.py"), "--pkb-root", str(TINY),
           "--logs-dir", str(tmp_path / "logs"), "--status-dir", str(tmp_path / "status"),
           "--summary", str(summary), "--device", "cpu"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(summary.read_text())["problems"]
    stems = [p.stem for p in sorted((TINY / "reference").glob("*.py"))
             if p.stem.split("_", 1)[0].isdigit()]
    assert [r["problem"] for r in rows] == sorted(stems, key=lambda s: int(s.split("_")[0]))
    assert all(r["status"] == "ok" for r in rows), rows
    for stem in stems:
        for rank in (0, 1):
            perf = json.loads((tmp_path / "logs" / f"problem_{stem}" / "reference"
                               / f"rank_{rank}_perf.json").read_text())
            assert perf["iterations"] == 100 and perf["wall_time_ms"] > 0


@pytest.mark.slow
def test_call_profile_and_spread_on_cpu() -> None:
    torch = pytest.importorskip("torch")
    sys.path.insert(0, str(ROOT / "validate"))
    import pkb_references as refs

    got = refs.call_profile(lambda x: (x * 2).sum(), (torch.ones(64),), iters=4)
    assert got["gpu_ops_per_call"] == 0 and got["nccl_kernels_per_call"] == 0  # no GPU here
    assert 0 < got["host_issue_us"] <= got["host_wall_us"]
    assert any("mul" in name for name, _us, _n in got["top_host_ops"])
    assert refs.spread([1.0, 2.0, 3.0, 4.0, 100.0])["median_us"] == 3000.0
    assert refs.merged([(0, 2), (1, 3), (5, 6), (5.5, 5.7)]) == 4.0
    assert [i for i, _ in refs.references(TINY, None, {2})] == [
        i for i, _ in refs.references(TINY, None) if i != 2]
