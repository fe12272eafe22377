"""The committed H100 run (docs/measurements/h100/) and what was learnt from it stay in step:
its calibrated topology regenerates byte for byte, and the shipped topologies' host costs and
the built-in kernel kinds are the ones it fitted (docs/measurements.md, "Learning from real
programs"). Regenerate after a model change with:

    pkbsim calibrate docs/measurements/h100/results.json --base dgx-h100 \\
        --out docs/measurements/h100-1gpu.yaml --name h100-1gpu
"""

from __future__ import annotations

import pytest
from paths import ROOT

from pkbsim.topology import load_topology
from pkbsim.topology.loader import list_topologies
from pkbsim.trace.cost import KINDS
from pkbsim.validation.calibrate import calibrate
from pkbsim.validation.programs import HOST_FIELDS
from pkbsim.validation.results import load

CALIBRATED = ROOT / "docs" / "measurements" / "h100-1gpu.yaml"


@pytest.fixture(autouse=True)
def _repo_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # the committed files name paths relative to the repository


def test_run_is_the_documented_one_gpu_h100_run() -> None:
    results = load("docs/measurements/h100/results.json")
    assert results.environment["gpu_name"] == "NVIDIA H100 80GB HBM3"
    status = {c.key: c.status for c in results.cases}
    assert status == {k: "ok" for k in ("hbm.copy_engine", "hbm.sm_copy", "launch.kernel",
                                        "host.dispatch", "host.copy", "kernels.kinds",
                                        "pkb.references")}
    refs = [m for _, m in results.measurements("pkb_reference")]
    assert len(refs) == 256 and {m.params["rep"] for m in refs} == {0, 1}
    assert len(results.measurements("kernel_kind")) == 264
    assert len(results.measurements("grpo_blog")) == 10


def test_calibrated_topology_regenerates() -> None:
    results = load("docs/measurements/h100/results.json")
    cal = calibrate(results, load_topology("dgx-h100"), name="h100-1gpu")
    assert cal.to_yaml("h100-1gpu") == CALIBRATED.read_text()


def test_shipped_host_costs_are_the_h100_fit() -> None:
    fitted = load_topology(str(CALIBRATED)).latency
    for name in list_topologies():
        lat = load_topology(name).latency
        for path in HOST_FIELDS.values():
            field = path.split(".")[1]
            mine = lat.library_us if field == "host_library_us" else getattr(lat, field)
            want = fitted.library_us if field == "host_library_us" else getattr(fitted, field)
            assert mine == want, (name, field)


def test_built_in_kernel_kinds_are_the_h100_fit() -> None:
    fitted = load_topology(str(CALIBRATED)).kernels
    assert set(fitted) == set(KINDS) - {"linalg", "other"}
    for kind, k in fitted.items():
        assert KINDS[kind].memory == pytest.approx(min(k.memory_efficiency, 1.0)), kind
        assert KINDS[kind].compute == pytest.approx(k.compute_efficiency), kind
        assert KINDS[kind].fixed_us == pytest.approx(k.fixed_us), kind
