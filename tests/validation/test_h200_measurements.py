"""The committed H200 run (docs/measurements/h200/) and what was derived from it stay in step.

The run itself came from the GPU (docs/measurements.md gives the command); the calibrated
topology and the error report are pure functions of it, so they must regenerate byte for byte.
Regenerate after a model change with:

    pkbsim calibrate docs/measurements/h200/results.json --base dgx-h200 \
        --out docs/measurements/h200-1gpu.yaml --name h200-1gpu
    pkbsim validate --report docs/measurements/h200 --base dgx-h200 \
        --calibrated docs/measurements/h200-1gpu.yaml
"""

from __future__ import annotations

import hashlib

import pytest
from paths import ROOT

from pkbsim.report import validation_report as vr
from pkbsim.topology import load_topology
from pkbsim.validation.calibrate import calibrate
from pkbsim.validation.error_report import build_report
from pkbsim.validation.results import load

RUN = ROOT / "docs" / "measurements" / "h200"
CALIBRATED = ROOT / "docs" / "measurements" / "h200-1gpu.yaml"


@pytest.fixture(autouse=True)
def _repo_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # the committed files name paths relative to the repository


# what docs/measurements.md says of the committed run: every one-GPU case ok, the rest waived
STATUS = {"topology.discover": "ok", "hbm.copy_engine": "ok", "hbm.sm_copy": "ok",
          "launch.kernel": "ok", "host.dispatch": "ok", "host.copy": "ok",
          "pkb.references": "ok"}  # imported from 2026-12-03 (to_results.py)


def test_run_is_the_documented_one_gpu_h200_run() -> None:
    results = load("docs/measurements/h200/results.json")
    assert results.environment["gpu_name"] == "NVIDIA H200"
    assert results.environment["gpu_count"] == 1
    status = {c.key: c.status for c in results.cases}
    assert {k: s for k, s in status.items() if k in STATUS} == STATUS
    assert all(s == "waived" for k, s in status.items() if k not in STATUS)


def test_calibrated_topology_regenerates() -> None:
    results = load("docs/measurements/h200/results.json")
    cal = calibrate(results, load_topology("dgx-h200"), name="h200-1gpu")
    assert cal.to_yaml("h200-1gpu") == CALIBRATED.read_text()


def test_error_report_regenerates() -> None:
    results = load("docs/measurements/h200/results.json")
    sha = hashlib.sha256((RUN / "results.json").read_bytes()).hexdigest()
    report = build_report(results, load_topology("dgx-h200"),
                          load_topology("docs/measurements/h200-1gpu.yaml"), sha)
    assert vr.render_json(report) == (RUN / "report.json").read_text()
    assert vr.render_markdown(report) == (RUN / "report.md").read_text()


def test_readme_quotes_the_report() -> None:
    results = load("docs/measurements/h200/results.json")
    sha = hashlib.sha256((RUN / "results.json").read_bytes()).hexdigest()
    report = build_report(results, load_topology("dgx-h200"),
                          load_topology("docs/measurements/h200-1gpu.yaml"), sha)
    table = [line.rstrip() for line in vr.render_table(report).splitlines()]
    readme = (ROOT / "README.md").read_text().splitlines()
    quoted = [line.rstrip() for line in readme
              if line.startswith(("latency   │", "middle    │", "bandwidth │"))]
    assert len(quoted) == 3
    for line in quoted:
        assert line in table, line


def test_discovered_topology_of_the_run_loads() -> None:
    topo = load_topology("docs/measurements/h200/discovered.yaml")
    assert (topo.gpus_per_node, topo.nodes) == (1, 1)
    assert topo.gpu.sm_count == 132 and topo.scale_up.fabric == "nvswitch"


def test_pkb_run_logs_match_docs_compare() -> None:
    """docs/compare.md quotes these wall times (us) of the first `pkbsim run` on the H200."""
    from pkbsim.pkb.logs import load_measured

    got = load_measured("docs/measurements/pkb_run_h200_w1/logs")
    times = {(m.problem, m.variant): round(m.time_us, 1) for m in got.items}
    assert times == {("1_allreduce", "reference"): 40.3, ("1_allreduce", "same"): 34.1,
                     ("13_gemm_allreduce", "reference"): 53.9,
                     ("13_gemm_allreduce", "same"): 110.5}
