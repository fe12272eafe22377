"""Calibration (pkbsim.validation.calibrate) and `pkbsim calibrate` on synthetic validation runs.

The runs are generated below from known parameters (TRUTH_*) with 1% multiplicative noise and a
fixed seed, by the model the calibration inverts: t = alpha + size / B for size sweeps,
rate = min(B_max x / s, B_max) over thread blocks, fixed values for latencies. The same runs
are committed as tests/data/validation/synthetic_{1,8}gpu.json (a test keeps them in step;
PKBSIM_UPDATE_GOLDEN=1 rewrites them) for the CLI tests and for other tests to use.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
from pathlib import Path
from typing import Any

import pytest
import yaml
from paths import DATA

from pkbsim.topology import Topology, load_topology
from pkbsim.validation.calibrate import Calibration, calibrate
from pkbsim.validation.fit import AlphaBetaFit, SaturationFit
from pkbsim.validation.results import CaseResult, Measurement, Results, dumps, load

DATA = DATA / "validation"
NOISE = 0.01
SIZES = [2**k for k in range(10, 31, 2)]  # 1 KiB .. 1 GiB, 11 sizes
BIG = 256 * 2**20
# dgx-h200's numbers the truth is scaled by
HBM_GBPS, PCIE_GBPS, LINE_GBPS, SMS = 4800, 64, 450, 132
LAUNCH_US, SM_STEP_US = 0.62, 0.83  # the truth's kernel launch; dgx-h200's SM step latency
EAGER_US = 1.25  # the truth's eager kernel launch, which SM kernels and NCCL calls pay
NCCL_STEP_US = {"Simple": 3.4, "LL128": 1.9, "LL": 0.6}  # dgx-h200's step_latency_us

TRUTH_1GPU: dict[str, float] = {
    "gpu.hbm_efficiency": 0.91,
    "mechanisms.copy_engine.latency_us": 3.1,
    "latency.kernel_launch_us": LAUNCH_US,
    "latency.eager_launch_us": EAGER_US,
    "latency.kernel_ramp_us": 2.0 - EAGER_US,  # the SM copy's alpha less the eager launch
    "latency.host_launch_us": 8.9,
    "latency.host_collective_us": 23.5,
    "latency.host_sync_us": 10.2,
    "pcie.latency_us": 2.5,
    "pcie.gpu_link_efficiency": 0.84,
}
TRUTH_8GPU: dict[str, float] = {
    **TRUTH_1GPU,
    "latency.host_collective_us": 30.0,  # world_size 8 is preferred to 1
    "mechanisms.copy_engine.latency_us": 2.9,  # peer copies are preferred to d2d
    "mechanisms.copy_engine.efficiency": 0.88,
    "scale_up.signal_latency_us": 0.85,
    "mechanisms.sm_ldst.efficiency": 0.76,
    "mechanisms.sm_ldst.sms_to_saturate": 80,
    "mechanisms.sm_ldst.latency_us": 1.1,
    "mechanisms.tma.efficiency": 0.80,
    "mechanisms.tma.sms_to_saturate": 16,
    "mechanisms.tma.latency_us": 0.9,
    "mechanisms.nccl_simple.efficiency": 0.84,
    "mechanisms.nccl_simple.latency_us": 9.0,
    "mechanisms.nccl_ll128.efficiency": 0.74,
    "mechanisms.nccl_ll128.latency_us": 13.0,
    "mechanisms.nccl_ll.efficiency": 0.40,
    "mechanisms.nccl_ll.latency_us": 6.0,
    "mechanisms.nvls_multimem.efficiency": 0.70,
}
SUMMARIES = ("latency.kernel_launch_us", "latency.eager_launch_us",
             "latency.host_launch_us", "latency.host_collective_us",
             "latency.host_sync_us", "scale_up.signal_latency_us")


class _Gen:
    """Builds measurements with noise from one seeded generator."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def m(self, op: str, size: int, time_us: float, **params: Any) -> Measurement:
        t = time_us * (1 + NOISE * self.rng.gauss(0, 1))
        bw = size / (t * 1e-6) / 1e9 if size else None
        return Measurement(op, size, t, bw, 20, 0.98 * t, 1.05 * t, params)

    def sweep(self, op: str, alpha_us: float, bw_GBps: float, sizes: list[int] = SIZES,
              **params: Any) -> list[Measurement]:
        return [self.m(op, n, alpha_us + n / (bw_GBps * 1e3), **params) for n in sizes]

    def blocks(self, op: str, alpha_us: float, plateau_GBps: float, s: float,
               steps: list[int], **params: Any) -> list[Measurement]:
        return [self.m(op, BIG, alpha_us + BIG / (min(plateau_GBps * b / s, plateau_GBps) * 1e3),
                       blocks=b, **params) for b in steps]


def _exact(op: str, time_us: float, **params: Any) -> Measurement:
    return Measurement(op, 0, time_us, None, 7, time_us - 0.2, time_us + 0.4, params)


def _one_gpu_cases(g: _Gen, t: dict[str, float]) -> list[CaseResult]:
    hbm_copy_GBps = t["gpu.hbm_efficiency"] * HBM_GBPS / 2  # a copy moves 2 x size over HBM
    full = 4 * SMS  # as validate/hbm.py: the size sweep on 4 blocks per SM
    sm_copy = g.sweep("d2d_sm_copy", 2.0, hbm_copy_GBps, blocks=full)
    steps = [1, 2, 4, 8, 16, 32, 64, 96, SMS, 2 * SMS, 8 * SMS]  # 8 x SMS only at 1 GiB
    sm_copy += [g.m("d2d_sm_copy", 2**30, 2.0 + 2**30 / (min(hbm_copy_GBps * b / 100,
                                                              hbm_copy_GBps) * 1e3), blocks=b)
                for b in steps]
    pcie_GBps = t["pcie.gpu_link_efficiency"] * PCIE_GBPS
    host = [8.8, t["latency.host_launch_us"], 9.4]
    return [
        CaseResult("hbm.copy_engine", "", 1, "ok", tuple(g.sweep(
            "d2d_copy_engine", TRUTH_1GPU["mechanisms.copy_engine.latency_us"], 2000.0))),
        CaseResult("hbm.sm_copy", "", 1, "ok", tuple(sm_copy)),
        CaseResult("launch.graph", "", 1, "ok", tuple(
            _exact("launch_graph_node", v, nodes=1000) for v in (0.61, LAUNCH_US, 0.64))
            + tuple(_exact("launch_eager_queued", v, kernels=1000)
                    for v in (1.2, EAGER_US, 1.3))),
        CaseResult("launch.late", "", 1, "timeout", (_exact("launch_graph_node", LAUNCH_US),)),
        CaseResult("host.dispatch", "", 1, "failed", (
            *(_exact("host_torch_op", v + 0.3, host_us=v, gpu_us=v + 0.3) for v in host),
            _exact("host_dist_call", 21.7, collective="all_reduce", world_size=1,
                   host_us=21.5),
            _exact("host_dist_call", 23.7, collective="broadcast", world_size=1,
                   host_us=23.5),
            _exact("host_dist_call", 27.0, collective="all_gather_into_tensor", world_size=1,
                   host_us=27.0),
            _exact("host_item_sync", t["latency.host_sync_us"]),
        ), error="synthetic: failed part-way"),
        CaseResult("host.copy", "", 1, "ok", tuple(
            g.sweep("h2d_pinned", t["pcie.latency_us"], pcie_GBps)
            + g.sweep("d2h_pinned", t["pcie.latency_us"], pcie_GBps))),
        CaseResult("peer.sm_ldst", "", 2, "waived", error="needs 2 GPUs, 1 present"),
    ]


def _peer_cases(g: _Gen, t: dict[str, float]) -> list[CaseResult]:
    line = LINE_GBPS
    pairs = [(a, b) for a in range(8) for b in range(8) if a != b]
    ce = [g.m("peer_copy_engine", BIG, 2.9 + BIG / (0.88 * line * 1e3), src=a, dst=b,
              direction="uni") for a, b in pairs]
    ce += g.sweep("peer_copy_engine", 2.9, 0.88 * line, src=0, dst=1, direction="uni")
    ce += [g.m("peer_copy_engine", BIG, BIG / (0.70 * line * 1e3), src=a, dst=b,
               direction="bidir") for a, b in pairs if a < b]  # ignored: uni only
    sm_alpha = t["mechanisms.sm_ldst.latency_us"] + EAGER_US + SM_STEP_US
    ldst = g.blocks("peer_sm_ldst", sm_alpha, 0.76 * line, 80,
                    [1, 2, 4, 8, 16, 24, 32, 48, 64, 96, SMS], mode="push", src=0, dst=1)
    ldst += g.sweep("peer_sm_ldst", sm_alpha, 0.76 * line, blocks=SMS, mode="push", src=0, dst=1)
    ldst += g.blocks("peer_sm_ldst", 5.0, 0.5 * line, 40, [1, 8, 32, 64, SMS], mode="pull")
    tma_alpha = t["mechanisms.tma.latency_us"] + EAGER_US + SM_STEP_US
    tma = g.blocks("peer_tma", tma_alpha, 0.80 * line, 16, [1, 2, 4, 8, 16, 32, 64, SMS, 2 * SMS])
    tma += g.sweep("peer_tma", tma_alpha, 0.80 * line, SIZES[1:], blocks=SMS)
    nccl: list[Measurement] = []
    for world in (4, 8):
        bus = 2 * (world - 1) / world
        for proto, mech in (("Simple", "nccl_simple"), ("LL128", "nccl_ll128"),
                            ("LL", "nccl_ll")):
            eff = t[f"mechanisms.{mech}.efficiency"] * (1 if world == 8 else 0.5)
            alpha = (t[f"mechanisms.{mech}.latency_us"] + EAGER_US
                     + 2 * (world - 1) * NCCL_STEP_US[proto])
            nccl += [g.m("nccl_collective", n, alpha + n * bus / (eff * line * 1e3),
                         collective="all_reduce", world_size=world, nccl_algo="Ring",
                         nccl_proto=proto) for n in SIZES]
        algbw = t["mechanisms.nvls_multimem.efficiency"] * line * world / (world + 1)
        nccl += g.sweep("nccl_collective", 30.0, algbw, collective="all_reduce",
                        world_size=world, nccl_algo="NVLS", nccl_proto="Simple")
        nccl += g.sweep("nccl_collective", 40.0, 100.0, collective="all_gather",
                        world_size=world, nccl_algo="Ring", nccl_proto="Simple")
    return [
        CaseResult("peer.copy_engine", "", 2, "ok", tuple(ce)),
        CaseResult("peer.sm_ldst", "", 2, "ok", tuple(ldst)),
        CaseResult("peer.tma", "", 2, "ok", tuple(tma)),
        CaseResult("peer.flag_latency", "", 2, "ok", tuple(
            _exact("peer_flag_roundtrip", v, src=0, dst=1) for v in (1.68, 1.70, 1.75))),
        CaseResult("host.dispatch_dist", "", 8, "ok", (
            _exact("host_dist_call", 30.5, collective="all_reduce", world_size=8,
                   host_us=30.0),)),
        CaseResult("nccl.collectives", "", 8, "ok", tuple(nccl)),
    ]


def _env(gpus: int) -> dict[str, Any]:
    return {"gpu_name": "NVIDIA H200", "gpu_count": gpus, "driver": "synthetic",
            "cuda": "13.0", "nccl": "2.28.9", "torch": "2.11.0", "date": "2026-12-04",
            "hostname": "synthetic"}


def synthetic_results(gpus: int, seed: int = 5) -> Results:
    """A validation run of ``gpus`` H200s made from TRUTH_1GPU or TRUTH_8GPU."""
    g = _Gen(seed)
    truth = TRUTH_1GPU if gpus == 1 else TRUTH_8GPU
    cases = _one_gpu_cases(g, truth)
    if gpus > 1:
        cases = [c for c in cases if c.status != "waived"] + _peer_cases(g, truth)
    options = {"synthetic": {"seed": seed, "noise": NOISE, "truth": truth,
                             "made_by": "tests/validation/test_calibrate.py synthetic_results"}}
    return Results(_env(gpus), tuple(cases), options, f"synthetic_{gpus}gpu.json")


@pytest.fixture(scope="module")
def h200() -> Topology:
    return load_topology("dgx-h200")


@pytest.fixture(scope="module")
def one_gpu(h200: Topology) -> Calibration:
    return calibrate(synthetic_results(1), h200)


@pytest.fixture(scope="module")
def eight_gpus(h200: Topology) -> Calibration:
    return calibrate(synthetic_results(8), h200)


def _check_recovered(cal: Calibration, truth: dict[str, float]) -> None:
    """Summaries are medians of exact values: equal. Fits: within 4 of their 1-sigma errors
    plus the 4-digit rounding, and their errors small (1% noise over 11-70 points gives
    0.1-0.5% on a bandwidth; a latency left after deductions has the alpha's absolute error,
    0.4% of NCCL Simple's 57 us alpha)."""
    assert set(cal.fields) == set(truth), set(cal.fields) ^ set(truth)
    for path, want in truth.items():
        got = cal.fields[path]
        if path in SUMMARIES:
            assert got.value == pytest.approx(want, rel=1e-12), path
        elif path.endswith("sms_to_saturate"):
            assert abs(got.value - want) <= max(1, 0.03 * want), path
        else:
            assert abs(got.value - want) <= 4 * got.err + 5e-4 * want, (path, got)
            assert got.err < (0.3 if got.unit == "us" else 0.02 * want), (path, got)


def test_one_gpu_run_recovers_its_parameters(one_gpu: Calibration) -> None:
    _check_recovered(one_gpu, TRUTH_1GPU)


def test_eight_gpu_run_recovers_its_parameters(eight_gpus: Calibration) -> None:
    _check_recovered(eight_gpus, TRUTH_8GPU)


def test_topology_carries_the_fitted_values(eight_gpus: Calibration) -> None:
    topo = eight_gpus.topology
    f = eight_gpus.fields
    assert topo.gpu.hbm_efficiency == f["gpu.hbm_efficiency"].value
    assert topo.gpu.hbm_Bps == pytest.approx(4800e9 * f["gpu.hbm_efficiency"].value)
    assert topo.mechanisms["sm_ldst"].sms_to_saturate == f["mechanisms.sm_ldst.sms_to_saturate"]\
        .value
    assert topo.mechanisms["nccl_simple"].efficiency == \
        f["mechanisms.nccl_simple.efficiency"].value
    assert topo.latency.kernel_launch_us == LAUNCH_US
    assert topo.scale_up.signal_latency_us == 0.85
    # kept: what no op measures
    assert topo.mechanisms["nccl_simple"].step_latency_us == 3.4
    assert topo.scale_out is not None and topo.scale_out.latency_us == 4.0
    assert topo.name == "dgx-h200-calibrated"


def test_one_gpu_run_keeps_peer_fields_and_says_so(one_gpu: Calibration, h200: Topology) -> None:
    kept_from = "not measured here; kept from base dgx-h200: "
    src = one_gpu.sources
    assert src["mechanisms.sm_ldst.efficiency"] == kept_from + h200.sources[
        "mechanisms.sm_ldst.efficiency"]
    assert src["scale_up.signal_latency_us"].startswith(kept_from)
    # a base entry covering a whole section stays one entry when nothing in it was fitted
    assert src["mechanisms.nccl_simple"] == kept_from + h200.sources["mechanisms.nccl_simple"]
    assert src["scale_out"] == kept_from + h200.sources["scale_out"]
    assert "mechanisms.sm_ldst.efficiency" in one_gpu.kept
    assert one_gpu.topology.mechanisms["sm_ldst"].efficiency == 0.75  # the base's


def test_sources_of_fitted_fields_say_where_they_came_from(one_gpu: Calibration) -> None:
    text = one_gpu.sources["pcie.gpu_link_efficiency"]
    f = one_gpu.fields["pcie.gpu_link_efficiency"]
    assert text.startswith(f"calibrated: {f.value:g} ± {f.err:.2g} from 22 measurement(s) of "
                           "h2d_pinned+d2h_pinned in synthetic_1gpu.json (NVIDIA H200 x 1, "
                           "host synthetic, 2026-12-04")
    assert "fit rel rms" in text and "gpu_link_GBps 64" in text
    # median of 8.8, 8.9, 9.4; MAD 0.1; err = sqrt(pi/2) x 1.4826 x 0.1 / sqrt(3) = 0.107
    assert one_gpu.sources["latency.host_launch_us"].startswith(
        "calibrated: 8.9 ± 0.11 us from 3 measurement(s) of host_torch_op")
    assert one_gpu.fields["latency.host_launch_us"].rel_rms == pytest.approx(
        math.sqrt(((0.1 / 8.8) ** 2 + (0.5 / 9.4) ** 2) / 3))
    # one measurement: the error from its repeats' range, (0.4 + 0.2) / 2 / sqrt(7)
    sync = one_gpu.fields["latency.host_sync_us"]
    assert sync.err == pytest.approx(0.3 / math.sqrt(7))
    assert "sqrt(7 repeats)" in sync.note


def test_both_pcie_directions_are_reported(one_gpu: Calibration) -> None:
    for way in ("h2d_pinned", "d2h_pinned"):
        fit = one_gpu.details[way]
        assert isinstance(fit, AlphaBetaFit) and fit.points == 11
        assert fit.bandwidth_GBps == pytest.approx(0.84 * 64, rel=0.02)


def test_sweeps_pick_the_largest_swept_grid(one_gpu: Calibration) -> None:
    # the 8 x SM grid is measured at one size only: the 4 x SM size sweep is used
    assert "d2d_sm_copy blocks=528" in one_gpu.details
    sat = one_gpu.details["d2d_sm_copy saturation at 1073741824 B"]
    assert isinstance(sat, SaturationFit)
    assert sat.saturate_at == pytest.approx(100, rel=0.05)


def test_measurements_of_a_timed_out_case_count(one_gpu: Calibration) -> None:
    # lines are written once each op is timed and checked: a later hang does not spoil them
    assert one_gpu.fields["latency.kernel_launch_us"].points == 4


def test_latency_deductions_are_noted(eight_gpus: Calibration) -> None:
    note = eight_gpus.fields["mechanisms.nccl_simple.latency_us"].note
    assert "less latency.eager_launch_us 1.25" in note
    assert "less 14 x the base's step_latency_us 3.4" in note


def test_every_field_of_the_written_file_has_a_source(eight_gpus: Calibration) -> None:
    data = yaml.safe_load(eight_gpus.to_yaml("x"))
    sources = data.pop("sources")
    for meta in ("schema_version", "name", "description"):
        data.pop(meta)

    def leaves(prefix: str, value: object) -> list[str]:
        if isinstance(value, dict):
            return [leaf for k, v in value.items()
                    for leaf in leaves(f"{prefix}.{k}" if prefix else k, v)]
        return [prefix]

    missing = [leaf for leaf in leaves("", data)
               if not any(leaf == k or leaf.startswith(k + ".") for k in sources)]
    assert missing == []
    fitted = {k for k, v in sources.items() if v.startswith("calibrated: ")}
    assert fitted == set(eight_gpus.fields)
    # a base entry for a whole section stays, for the fields under it that were not fitted
    assert sources["mechanisms.nccl_simple"].startswith("not measured here; kept from base")
    assert len(eight_gpus.kept) == len(leaves("", data)) - len(fitted)


def test_written_file_loads_as_the_same_topology(eight_gpus: Calibration, tmp_path: Path) -> None:
    path = tmp_path / "my-node.yaml"
    text = eight_gpus.to_yaml("my-node")
    path.write_text(text)
    topo = load_topology(str(path))
    assert topo.name == "my-node"
    assert topo.gpu == eight_gpus.topology.gpu
    assert topo.mechanisms == eight_gpus.topology.mechanisms
    assert topo.latency == eight_gpus.topology.latency
    assert topo.pcie == eight_gpus.topology.pcie
    assert topo.sources == eight_gpus.topology.sources
    assert text.startswith("# Calibrated by `pkbsim calibrate` from synthetic_8gpu.json\n")
    assert "calibrated from synthetic_8gpu.json (NVIDIA H200, 2026-12-04)" in topo.description
    # hbm_efficiency, absent from the base file, goes after hbm_bandwidth_GBps
    gpu_keys = list(yaml.safe_load(text)["gpu"])
    assert gpu_keys.index("hbm_efficiency") == gpu_keys.index("hbm_bandwidth_GBps") + 1


def test_efficiency_above_one_is_clamped_and_said(h200: Topology) -> None:
    g = _Gen(1)
    run = Results(_env(1), (CaseResult("hbm.sm_copy", "", 1, "ok", tuple(
        g.sweep("d2d_sm_copy", 2.0, 2600.0, blocks=SMS))),), file="r.json")
    cal = calibrate(run, h200)
    assert cal.topology.gpu.hbm_efficiency == 1.0
    assert "clamped to 1 (the base's gpu.hbm_bandwidth_GBps is below what was measured)" in \
        cal.sources["gpu.hbm_efficiency"]


def test_partial_data_skips_fields_and_says_why(h200: Topology) -> None:
    g = _Gen(2)
    run = Results(_env(1), (
        CaseResult("host.copy", "", 1, "failed", (g.m("h2d_pinned", 2**20, 20.0),)),
        CaseResult("hbm.sm_copy", "", 1, "ok", tuple(
            g.sweep("d2d_sm_copy", 2.0, 2000.0, blocks=64))),
        CaseResult("peer.tma", "", 2, "ok", tuple(
            g.blocks("peer_tma", 2.0, 300.0, 16, [1, 2, 4]))),
    ), file="r.json")
    cal = calibrate(run, h200)
    assert cal.fields == {}
    assert "at least 2 points" in cal.skipped["pcie.latency_us"]
    assert "132 blocks (sm_count)" in cal.skipped["gpu.hbm_efficiency"]
    assert "lower bounds" in cal.skipped["mechanisms.tma.efficiency"]
    assert cal.topology.pcie == h200.pcie
    assert cal.topology.gpu == h200.gpu


def test_empty_run_keeps_everything(h200: Topology) -> None:
    cal = calibrate(Results({}, (), file=""), h200, name="same")
    assert (cal.fields, cal.skipped, cal.results_sha256) == ({}, {}, "")
    assert cal.topology.mechanisms == h200.mechanisms
    assert cal.topology.name == "same"
    assert all(v.startswith("not measured here") for v in cal.sources.values())


def test_base_without_the_mechanism_skips_it() -> None:
    base = load_topology("pcie-l40s-8")  # no tma, no nvls
    cal = calibrate(synthetic_results(8), base)
    assert "no tma mechanism" in cal.skipped["mechanisms.tma.efficiency"]
    assert "mechanisms.tma.efficiency" not in cal.fields
    assert "tma" not in cal.topology.mechanisms


def test_results_hash_is_recorded(h200: Topology, tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    path.write_text(dumps(synthetic_results(1)))
    cal = calibrate(load(path), h200)
    assert cal.results_sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert f"sha256 {cal.results_sha256[:16]}" in cal.sources["gpu.hbm_efficiency"]


# ------------------------------------------------------------------ committed fixtures

@pytest.mark.parametrize("gpus", [1, 8])
def test_committed_fixtures_match_the_generator(gpus: int) -> None:
    path = DATA / f"synthetic_{gpus}gpu.json"
    text = dumps(synthetic_results(gpus))
    if os.environ.get("PKBSIM_UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert json.loads(path.read_text()) == json.loads(text)


# ------------------------------------------------------------------ the command

def test_cli_writes_a_calibrated_topology(cli, tmp_path: Path) -> None:
    out = tmp_path / "my-node.yaml"
    r = cli("calibrate", str(DATA / "synthetic_8gpu.json"), "--base", "dgx-h200", "--out",
            str(out))
    assert r.code == 0, r.err
    topo = load_topology(str(out))
    assert topo.name == "my-node"
    assert topo.mechanisms["sm_ldst"].sms_to_saturate == pytest.approx(80, abs=2)
    assert f"Wrote {out}: {len(TRUTH_8GPU)} field(s) fitted" in r.out
    assert "mechanisms.nccl_simple.efficiency" in r.out and "0.82" in r.out  # base value


def test_cli_picks_the_base_by_gpu_name(cli, tmp_path: Path) -> None:
    out = tmp_path / "node.yaml"
    r = cli("calibrate", str(DATA / "synthetic_1gpu.json"), "--out", str(out), "--name", "h200-x")
    assert r.code == 0, r.err
    assert load_topology(str(out)).name == "h200-x"
    assert "kept from base dgx-h200" in out.read_text()


def test_cli_with_nothing_to_fit_still_writes(cli, tmp_path: Path) -> None:
    run = tmp_path / "results.json"
    run.write_text(dumps(Results(_env(1), ())))
    out = tmp_path / "node.yaml"
    r = cli("calibrate", str(tmp_path), "--out", str(out))
    assert r.code == 0, r.err
    assert "Nothing could be fitted" in r.out
    assert load_topology(str(out)).mechanisms == load_topology("dgx-h200").mechanisms


@pytest.mark.parametrize(("content", "message"), [
    (None, "no such file"),
    ("{not json", "not JSON"),
    ('{"schema": "other/1"}', "schema: expected 'pkbsim.validation/1'"),
    (json.dumps({"schema": "pkbsim.validation/1", "environment": {"gpu_name": "Tesla T4"},
                 "cases": []}), "no shipped topology matches GPU 'Tesla T4'"),
])
def test_cli_bad_input_fails_cleanly_and_keeps_out(cli, tmp_path: Path, content: str | None,
                                                    message: str) -> None:
    run = tmp_path / "results.json"
    if content is not None:
        run.write_text(content)
    out = tmp_path / "node.yaml"
    out.write_text("precious\n")
    r = cli("calibrate", str(run), "--out", str(out))
    assert r.code == 2
    assert r.err.count("\n") == 1 and message in r.err, r.err
    assert "Traceback" not in r.err
    assert out.read_text() == "precious\n"


def test_cli_unknown_base_fails_cleanly(cli, tmp_path: Path) -> None:
    out = tmp_path / "node.yaml"
    r = cli("calibrate", str(DATA / "synthetic_1gpu.json"), "--base", "no-such", "--out",
            str(out))
    assert r.code == 2 and "unknown topology 'no-such'" in r.err
    assert not out.exists()


def test_self_test_peer_measurements_are_ignored(h200: Topology) -> None:
    # validate/peer.py --self puts both ends on GPU 0: local copies, not peer numbers
    g = _Gen(3)
    run = Results(_env(1), (
        CaseResult("peer.copy_engine", "", 2, "ok", tuple(
            g.sweep("peer_copy_engine", 2.0, 1500.0, src=0, dst=0, direction="uni"))),
        CaseResult("peer.tma", "", 2, "ok", tuple(
            g.blocks("peer_tma", 2.0, 900.0, 16, [1, 2, 4, 8, 16, 32, 64])),
            data={"self_test": True}),
    ), file="r.json")
    cal = calibrate(run, h200)
    assert cal.fields == {}
    assert cal.notes == ["18 peer measurement(s) with both ends on one GPU (a self test, not a "
                         "peer) ignored"]


def test_one_bare_value_has_no_error_estimate(h200: Topology) -> None:
    run = Results(_env(1), (CaseResult("launch.graph", "", 1, "ok", (
        Measurement("launch_graph_node", 0, 0.7, None),)),), file="r.json")
    cal = calibrate(run, h200)
    assert cal.topology.latency.kernel_launch_us == 0.7
    assert math.isnan(cal.fields["latency.kernel_launch_us"].err)
    assert cal.sources["latency.kernel_launch_us"].startswith(
        "calibrated: 0.7 us (no error estimate) from 1 measurement(s) of launch_graph_node")


def test_single_gpu_nccl_runs_fit_nothing(h200: Topology) -> None:
    g = _Gen(4)
    run = Results(_env(1), (CaseResult("nccl.collectives", "", 1, "ok", tuple(
        g.sweep("nccl_collective", 10.0, 500.0, collective="all_reduce", world_size=1,
                nccl_algo="Ring", nccl_proto="Simple"))),), file="r.json")
    cal = calibrate(run, h200)
    assert cal.fields == {}
    assert "only world_size 1" in cal.skipped["mechanisms.nccl_simple.efficiency"]
