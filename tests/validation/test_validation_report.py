"""The model's error report: predictions per op, the report object, its renderers, the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsoncheck import get
from paths import ROOT

from pkbsim.report.validation_report import (
    SCHEMA,
    family,
    plot,
    render_json,
    render_markdown,
    render_table,
    to_dict,
)
from pkbsim.topology import load_topology
from pkbsim.topology.schema import Topology
from pkbsim.validation.error_report import build_report
from pkbsim.validation.predict import explain, predict
from pkbsim.validation.results import CaseResult, Measurement, Results, dumps, measurement

KiB, MiB = 1024, 1024 * 1024
US = 1e-6

# the calibrated topology of these tests: dgx-h200 with other numbers everywhere it matters
CHANGES: dict[str, dict[str, Any]] = {
    "gpu": {"hbm_efficiency": 0.9},
    "latency": {"kernel_launch_us": 1.1, "host_launch_us": 8.0, "host_sync_us": 12.0,
                "host_collective_us": 20.0},
    "pcie": {"latency_us": 2.2, "gpu_link_efficiency": 0.8},
    "scale_up": {"signal_latency_us": 0.7},
}


@pytest.fixture(scope="module")
def base() -> Topology:
    return load_topology("dgx-h200")


@pytest.fixture(scope="module")
def cal_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = yaml.safe_load((ROOT / "topologies" / "dgx-h200.yaml").read_text())
    data["name"] = "h200-test-calibrated"
    for section, values in CHANGES.items():
        data[section].update(values)
    data["mechanisms"]["copy_engine"]["latency_us"] = 2.0
    data["mechanisms"]["copy_engine"]["efficiency"] = 0.9
    path = tmp_path_factory.mktemp("cal") / "h200-test-calibrated.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def cal(cal_file: Path) -> Topology:
    return load_topology(str(cal_file))


def _t_us(m: Measurement, topo: Topology) -> float:
    p = predict(m, topo)
    assert p is not None, explain(m, topo)
    return p.predicted_us


def m_(op: str, size: int = 0, **params: Any) -> Measurement:
    return measurement(op, size, [1.0], **params)


# ------------------------------------------------------------------ predictions: closed forms

@pytest.mark.parametrize("size", [KiB, 64 * MiB])
def test_hbm_copies(cal: Topology, size: int) -> None:
    hbm_Bps = 4800e9 * 0.9  # peak x gpu.hbm_efficiency
    sm = _t_us(m_("d2d_sm_copy", size, blocks=132), cal)
    assert sm == pytest.approx(1.1 + 2 * size / hbm_Bps / US, rel=1e-12)
    assert _t_us(m_("d2d_sm_copy", size, blocks=264), cal) == sm  # more blocks than SMs
    ce = _t_us(m_("d2d_copy_engine", size), cal)
    assert ce == pytest.approx(2.0 + 2 * size / hbm_Bps / US, rel=1e-12)


def test_eager_launch_and_ramp_split_the_kernel_costs(cal_file: Path) -> None:
    """Graph nodes cost kernel_launch_us, eager empty kernels eager_launch_us, and an SM copy
    of the size sweep (any grid) eager_launch_us + kernel_ramp_us before its bytes."""
    topo = load_topology(str(cal_file), {"latency.eager_launch_us": 1.6,
                                         "latency.kernel_ramp_us": 0.9})
    assert _t_us(m_("launch_graph_node"), topo) == pytest.approx(1.1, rel=1e-12)
    assert _t_us(m_("launch_eager_queued"), topo) == pytest.approx(1.6, rel=1e-12)
    sized = m_("d2d_sm_copy", 4 * KiB, blocks=1, sweep="size")
    assert _t_us(sized, topo) == pytest.approx(1.6 + 0.9 + 8 * KiB / (4800e9 * 0.9) / US,
                                               rel=1e-12)
    assert predict(m_("d2d_sm_copy", 4 * KiB, blocks=1, sweep="blocks"), topo) is None


def test_sm_copy_on_part_of_the_gpu_is_not_modelled(cal: Topology) -> None:
    m = m_("d2d_sm_copy", MiB, blocks=64)
    assert predict(m, cal) is None
    assert "fewer thread blocks than SMs (132)" in str(explain(m, cal))


@pytest.mark.parametrize("op, size", [("h2d_pinned", KiB), ("d2h_pinned", 256 * MiB)])
def test_host_copies(cal: Topology, base: Topology, op: str, size: int) -> None:
    assert _t_us(m_(op, size), cal) == pytest.approx(2.2 + size / (64e9 * 0.8) / US, rel=1e-12)
    assert _t_us(m_(op, size), base) == pytest.approx(2.8 + size / (64e9 * 0.83) / US,
                                                      rel=1e-12)


@pytest.mark.parametrize("op", ["launch_graph_node", "launch_eager_queued"])
def test_launch_is_kernel_launch(cal: Topology, base: Topology, op: str) -> None:
    assert _t_us(m_(op), cal) == pytest.approx(1.1, rel=1e-12)
    assert _t_us(m_(op), base) == pytest.approx(0.78, rel=1e-12)


def test_host_costs(cal: Topology) -> None:
    assert _t_us(m_("host_item_sync"), cal) == pytest.approx(12.0, rel=1e-12)
    assert _t_us(m_("host_synchronize"), cal) == pytest.approx(12.0, rel=1e-12)
    assert _t_us(m_("host_torch_op"), cal) == pytest.approx(8.0, rel=1e-12)  # host-bound
    call = m_("host_dist_call", 2 * KiB, world_size=1, collective="all_reduce")
    assert _t_us(call, cal) == pytest.approx(20.0, rel=1e-12)
    many = m_("host_dist_call", 2 * KiB, world_size=8, collective="all_gather_into_tensor")
    assert _t_us(many, cal) == pytest.approx(20.0, rel=1e-12)
    assert "all_gather" in str(explain(many, cal))


def test_torch_op_is_gpu_bound_when_launches_cost_more(cal: Topology) -> None:
    slow = _replace_latency(cal, kernel_launch_us=30.0)
    hbm_s = 8192 / (4800e9 * 0.9)  # the trivial kernel: torch.add on 1,024 fp32 elements
    assert _t_us(m_("host_torch_op"), slow) == pytest.approx(30.0 + hbm_s / US, rel=1e-12)


def _replace_latency(topo: Topology, **values: float) -> Topology:
    from dataclasses import replace

    return replace(topo, latency=replace(topo.latency, **values))


def test_flag_round_trip_is_two_signals(cal: Topology) -> None:
    assert _t_us(m_("peer_flag_roundtrip", src=0, dst=5), cal) == pytest.approx(1.4, rel=1e-12)


@pytest.mark.parametrize("direction", ["uni", "bidir"])
def test_peer_copy_engine(cal: Topology, direction: str) -> None:
    size = 64 * MiB
    got = _t_us(m_("peer_copy_engine", size, src=0, dst=1, direction=direction), cal)
    # latency + size at efficiency x 450 GB/s; both directions use separate ports
    assert got == pytest.approx(2.0 + size / (0.9 * 450e9) / US, rel=1e-12)


@pytest.mark.parametrize("op, mech", [("peer_sm_ldst", "sm_ldst"), ("peer_tma", "tma")])
def test_peer_sm_kernels_scale_with_blocks(cal: Topology, op: str, mech: str) -> None:
    size, mc = 16 * MiB, cal.mechanisms[mech]
    blocks = mc.sms_to_saturate // 2
    got = _t_us(m_(op, size, src=0, dst=1, blocks=blocks, mode="push"), cal)
    rate = 450e9 * mc.efficiency * blocks / mc.sms_to_saturate
    assert got == pytest.approx(1.1 + mc.latency_us + size / rate / US + mc.step_latency_us,
                                rel=1e-12)
    full = _t_us(m_(op, size, src=0, dst=1, blocks=132, mode="pull"), cal)
    assert full == pytest.approx(1.1 + mc.latency_us + size / (450e9 * mc.efficiency) / US
                                 + mc.step_latency_us, rel=1e-12)


def test_nccl_ring_all_reduce_closed_form(cal: Topology) -> None:
    size, w = 64 * MiB, 8
    m = m_("nccl_collective", size, collective="all_reduce", world_size=w, nccl_algo="Ring",
           nccl_proto="Simple")
    simple = cal.mechanisms["nccl_simple"]
    # each ring step also pays what a Simple step over NVSwitch costs beyond NCCL's constant
    # (the fabric kind's step_latency_us, docs/metrics.md 9.8)
    hop = simple.step_latency_us + cal.scale_up.step_latency_us["Simple"]
    expected = (1.1 + simple.latency_us + 2 * (w - 1) * hop
                + 2 * (w - 1) / w * size / (simple.efficiency * 450e9) / US)
    assert _t_us(m, cal) == pytest.approx(expected, rel=1e-9)
    assert "ring/Simple" in str(explain(m, cal))


def test_nccl_size_is_nccl_tests_s(cal: Topology) -> None:
    s, w = 8 * MiB, 8  # all-gather: S is the gathered array, each rank hands S / W
    m = m_("nccl_collective", s, collective="all_gather", world_size=w, nccl_algo="ring",
           nccl_proto="simple")
    simple = cal.mechanisms["nccl_simple"]
    hop = simple.step_latency_us + cal.scale_up.step_latency_us["Simple"]
    expected = (1.1 + simple.latency_us + (w - 1) * hop
                + (w - 1) * (s / w) / (simple.efficiency * 450e9) / US)
    assert _t_us(m, cal) == pytest.approx(expected, rel=1e-9)


def test_nccl_leaves_nvls_out_unless_forced(cal: Topology) -> None:
    free = m_("nccl_collective", 256 * MiB, collective="all_reduce", world_size=8)
    assert "nvls" not in str(explain(free, cal))
    assert "nvls/Simple" in str(explain(free, cal, multicast=True))
    forced = m_("nccl_collective", 256 * MiB, collective="all_reduce", world_size=8,
                nccl_algo="NVLS")
    assert "nvls/Simple" in str(explain(forced, cal))


@pytest.mark.parametrize("m, why", [
    (m_("launch_eager_host"), "CuPy launch"),
    (m_("launch_sync_roundtrip"), "wake-up"),
    (m_("nccl_collective", MiB, collective="all_reduce", world_size=16), "exceeds"),
    (m_("nccl_collective", MiB, collective="all_reduce", world_size=8, nccl_algo="CollNetDirect"),
     "NCCL_ALGO=CollNetDirect"),
    (m_("nccl_collective", MiB, collective="hypercube", world_size=8), "unknown collective"),
    (m_("nccl_collective", MiB, collective="all_reduce", world_size=2, backend="gloo"),
     "backend gloo"),
    (m_("host_dist_call", 2 * KiB, collective="all_reduce", world_size=1, backend="gloo"),
     "backend gloo"),
    (m_("peer_copy_engine", MiB, src=0, dst=8, direction="uni"), "beyond"),
    (m_("peer_sm_ldst", MiB, src=0, dst=1, mode="push"), "blocks"),
    (m_("peer_flag_roundtrip", src=1, dst=1), "distinct"),
])
def test_not_modelled(cal: Topology, m: Measurement, why: str) -> None:
    assert predict(m, cal) is None
    assert why in str(explain(m, cal))


# ------------------------------------------------------------------ the report

def _results(ms: list[tuple[str, Measurement]], **env: Any) -> Results:
    cases: dict[str, list[Measurement]] = {}
    for key, m in ms:
        cases.setdefault(key, []).append(m)
    environment = {"gpu_name": "NVIDIA H200", "gpu_count": 8, "date": "2026-12-05", **env}
    return Results(environment, tuple(CaseResult(k, f"case {k}", 1, "ok", tuple(v))
                                      for k, v in cases.items()), {}, "results.json")


OPS = [  # (case, op, size, params): every modelled op, several sizes and regimes
    ("hbm.copy_engine", "d2d_copy_engine", 4 * KiB, {}),
    ("hbm.copy_engine", "d2d_copy_engine", 256 * MiB, {}),
    ("hbm.sm_copy", "d2d_sm_copy", 256 * MiB, {"blocks": 132}),
    ("hbm.sm_copy", "d2d_sm_copy", 64 * KiB, {"blocks": 132}),
    ("launch.kernel", "launch_graph_node", 0, {"nodes": 100}),
    ("launch.kernel", "launch_eager_queued", 0, {}),
    ("host.dispatch", "host_torch_op", 0, {"host_us": 8.0, "gpu_us": 3.0}),
    ("host.dispatch", "host_dist_call", 2 * KiB, {"world_size": 1, "collective": "all_reduce"}),
    ("host.dispatch", "host_item_sync", 0, {}),
    ("host.copy", "h2d_pinned", KiB, {}),
    ("host.copy", "d2h_pinned", 512 * KiB, {}),
    ("host.copy", "h2d_pinned", 64 * MiB, {}),
    ("peer.copy_engine", "peer_copy_engine", 64 * MiB, {"src": 0, "dst": 1, "direction": "uni"}),
    ("peer.flag_latency", "peer_flag_roundtrip", 0, {"src": 0, "dst": 1}),
    ("nccl.collectives", "nccl_collective", 16 * MiB,
     {"collective": "all_reduce", "world_size": 8}),
]


def _matching(topo: Topology, errors: dict[int, float] | None = None
              ) -> list[tuple[str, Measurement]]:
    """Measurements equal to ``topo``'s predictions (row i off by errors[i])."""
    out = []
    for i, (case, op, size, params) in enumerate(OPS):
        t = _t_us(m_(op, size, **params), topo)
        e = (errors or {}).get(i, 0.0)
        out.append((case, measurement(op, size, [t / (1 + e)], **params)))
    return out


def test_measurements_equal_to_calibrated_predictions(base: Topology, cal: Topology) -> None:
    report = build_report(_results(_matching(cal)), base, cal, "ab" * 32)
    assert len(report.rows) == len(OPS)
    for row in report.rows:
        assert row.error("calibrated") == pytest.approx(0.0, abs=1e-12)
        t_base = _t_us(row.m, base)
        assert row.error("base") == pytest.approx((t_base - row.m.time_us) / row.m.time_us,
                                                  rel=1e-12)
    launch = next(r for r in report.rows if r.m.op == "launch_graph_node")
    assert launch.error("base") == pytest.approx((0.78 - 1.1) / 1.1, rel=1e-12)
    sync = next(r for r in report.rows if r.m.op == "host_item_sync")
    base_sync = base.latency.host_sync_us  # the base's own value, whatever it is
    assert sync.error("base") == pytest.approx((base_sync - 12.0) / 12.0, rel=1e-12)
    assert report.overall.median_abs_error["calibrated"] == pytest.approx(0.0, abs=1e-12)
    assert report.overall.median_abs_error["base"] > 0.05
    assert report.not_modelled == ()


def test_regimes_and_medians(base: Topology, cal: Topology) -> None:
    # calibrated errors chosen per row; regime by size: < 64 KiB latency, >= 1 MiB bandwidth
    errors = {0: 0.1, 4: -0.3, 5: 0.05, 6: 0.2, 7: 0.0, 8: -0.02, 9: 0.5, 13: 0.4,  # latency
              3: 0.2, 10: -0.4,  # middle: 64 KiB exactly, 512 KiB
              1: 0.01, 2: -0.03, 11: 0.07, 12: 0.0, 14: 0.9}  # bandwidth
    report = build_report(_results(_matching(cal, errors)), base, cal)
    by = {s.key: s for s in report.by_regime}
    assert list(by) == ["latency", "middle", "bandwidth"]
    assert [by[k].n for k in by] == [8, 2, 5]
    assert by["latency"].median_abs_error["calibrated"] == pytest.approx(
        (0.1 + 0.2) / 2, rel=1e-9)  # |e| sorted: 0, .02, .05, .1, .2, .3, .4, .5
    assert by["middle"].median_abs_error["calibrated"] == pytest.approx(0.3, rel=1e-9)
    assert by["bandwidth"].median_abs_error["calibrated"] == pytest.approx(0.03, rel=1e-9)
    ops = {s.key: s for s in report.by_op}
    assert ops["d2d_copy_engine"].n == 2
    assert ops["d2d_copy_engine"].median_abs_error["calibrated"] == pytest.approx(0.055)
    cases = {s.key: s for s in report.by_case}
    assert cases["host.copy"].n == 3
    assert cases["host.copy"].median_abs_error["calibrated"] == pytest.approx(0.4, rel=1e-9)


def test_empty_regime_is_listed(base: Topology, cal: Topology) -> None:
    report = build_report(_results([("l", measurement("launch_graph_node", 0, [1.0]))]), base,
                          cal)
    by = {s.key: s for s in report.by_regime}
    assert by["bandwidth"].n == 0 and by["bandwidth"].median_abs_error["base"] is None


def _with_unmodelled(cal: Topology) -> list[tuple[str, Measurement]]:
    return [*_matching(cal),
            ("launch.kernel", m_("launch_eager_host")),
            ("launch.kernel", m_("launch_eager_host")),
            ("launch.kernel", m_("launch_sync_roundtrip")),
            ("hbm.sm_copy", m_("d2d_sm_copy", MiB, blocks=8))]


def test_not_modelled_ops_are_counted(base: Topology, cal: Topology) -> None:
    report = build_report(_results(_with_unmodelled(cal)), base, cal)
    counts = {nm.op: nm.count for nm in report.not_modelled}
    assert counts == {"launch_eager_host": 2, "launch_sync_roundtrip": 1, "d2d_sm_copy": 1}
    assert all(nm.on == ("base", "calibrated") for nm in report.not_modelled)
    assert len(report.rows) == len(OPS)


def test_prediction_on_one_topology_only(base: Topology, cal: Topology) -> None:
    from dataclasses import replace

    one_gpu = replace(cal, name="one-gpu", gpus_per_node=1)
    peer = m_("peer_copy_engine", MiB, src=0, dst=1, direction="uni")
    report = build_report(_results([("peer.copy_engine", peer)]), base, one_gpu)
    (row,) = report.rows
    assert row.base is not None and row.calibrated is None
    assert report.by_op[0].n_by == {"base": 1, "calibrated": 0}
    (nm,) = report.not_modelled
    assert nm.on == ("calibrated",) and "beyond" in nm.reason


# ------------------------------------------------------------------ renderers

@pytest.fixture(scope="module")
def report(base: Topology, cal: Topology) -> Any:
    return build_report(_results(_with_unmodelled(cal)), base, cal, "cd" * 32)


def test_json_shape(report: Any, cal: Topology) -> None:
    data = json.loads(render_json(report))
    assert data == to_dict(report)
    assert data["schema"] == SCHEMA == "pkbsim.validation-report/1"
    for key in ("pkbsim_version", "environment.gpu_name", "overall.median_abs_error.base",
                "provenance.results_sha256", "provenance.base_topology.sha256",
                "provenance.calibrated_topology.name", "regimes.latency"):
        get(data, key)
    assert data["provenance"]["results_sha256"] == "cd" * 32
    assert data["provenance"]["base_topology"]["file"] == "topologies/dgx-h200.yaml"
    assert data["provenance"]["calibrated_topology"]["sha256"] == cal.sha256
    assert [s["key"] for s in data["by_regime"]] == ["latency", "middle", "bandwidth"]
    assert len(data["measurements"]) == len(OPS)
    first = data["measurements"][0]
    assert set(first) == {"case", "op", "size_bytes", "params", "regime", "measured_us",
                          "predicted_us", "error", "model"}
    assert set(first["error"]) == {"base", "calibrated"}
    assert first["error"]["calibrated"] == 0.0
    assert {n["op"] for n in data["not_modelled"]} == {"launch_eager_host",
                                                      "launch_sync_roundtrip", "d2d_sm_copy"}
    assert next(c for c in data["by_case"] if c["key"] == "host.copy")["status"] == "ok"


def test_text_and_markdown(report: Any) -> None:
    text = render_table(report)
    for needle in ("Median |error| per regime", "latency", "bandwidth", "Median |error| per op",
                   "host.copy", "Not modelled:", "launch_eager_host x 2",
                   "base dgx-h200 (topologies/dgx-h200.yaml)", "h200-test-calibrated"):
        assert needle in text
    assert "Every measurement" not in text
    assert "Every measurement" in render_table(report, measurements=True)
    md = render_markdown(report)
    assert md.startswith("# Model error against results.json")
    assert "| regime | n (base/calibrated) | base | calibrated |" in md
    assert "| host.copy | h2d_pinned | 1 KiB |" in md
    assert "## Not modelled" in md
    assert md.count("\n| ") >= len(OPS) + 3 + len(report.by_op) + len(report.by_case)


def test_plot_is_deterministic(report: Any, base: Topology) -> None:
    png = plot(report)
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert png == plot(report, "png")
    other = build_report(_results(_matching(base)), base, base)
    assert plot(other) != png
    assert plot(report, "svg").startswith(b"<?xml")


def test_op_families() -> None:
    assert family("d2d_sm_copy")[0] == "HBM copy"
    assert family("h2d_pinned") == family("d2h_pinned")
    assert family("nccl_collective")[0] == "NCCL"


# ------------------------------------------------------------------ CLI

def _run_dir(tmp_path: Path, cal: Topology, **env: Any) -> Path:
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "results.json").write_text(dumps(_results(_with_unmodelled(cal), **env)))
    return folder


def test_cli_report(cli, tmp_path: Path, cal: Topology, cal_file: Path) -> None:
    folder = _run_dir(tmp_path, cal)
    before = (folder / "results.json").read_bytes()
    r = cli("validate", "--report", str(folder), "--calibrated", str(cal_file))
    assert r.code == 0, r.err
    assert r.err == ""
    assert "Median |error| per regime" in r.out
    assert "Wrote report.json, report.md, predicted_vs_measured.png" in r.out
    data = json.loads((folder / "report.json").read_text())
    assert data["schema"] == SCHEMA
    assert data["provenance"]["base_topology"]["name"] == "dgx-h200"  # by GPU name
    assert data["overall"]["median_abs_error"]["calibrated"] == 0.0
    import hashlib

    assert data["provenance"]["results_sha256"] == hashlib.sha256(before).hexdigest()
    assert (folder / "report.md").read_text().startswith("# Model error")
    assert (folder / "predicted_vs_measured.png").read_bytes().startswith(b"\x89PNG")
    assert (folder / "results.json").read_bytes() == before
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")]


def test_cli_report_with_base(cli, tmp_path: Path, cal: Topology, cal_file: Path) -> None:
    folder = _run_dir(tmp_path, cal, gpu_name="some GPU")
    r = cli("validate", "--report", str(folder), "--base", "dgx-h100", "--calibrated",
            str(cal_file))
    assert r.code == 0, r.err
    data = json.loads((folder / "report.json").read_text())
    assert data["provenance"]["base_topology"]["name"] == "dgx-h100"


def _one_line_error(r: Any, needle: str) -> None:
    assert r.code == 2
    assert r.err.count("\n") == 1 and r.err.startswith("pkbsim: error:"), r.err
    assert needle in r.err
    assert "Traceback" not in r.err


def test_cli_bad_input(cli, tmp_path: Path, cal: Topology, cal_file: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    _one_line_error(cli("validate", "--report", str(empty), "--calibrated", str(cal_file)),
                    "results.json: no such file")
    _one_line_error(cli("validate", "--report", str(tmp_path / "nope")), "not a folder")
    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    (corrupt / "results.json").write_text('{"schema": "pkbsim.validation/1", "cases": [')
    _one_line_error(cli("validate", "--report", str(corrupt)), "not JSON")
    unknown = _run_dir(tmp_path, cal, gpu_name="Mystery GPU")
    _one_line_error(cli("validate", "--report", str(unknown), "--calibrated", str(cal_file)),
                    "no shipped topology matches GPU 'Mystery GPU'")
    assert not (unknown / "report.json").exists()
    _one_line_error(cli("validate", "--report", str(unknown), "--base", "dgx-h200",
                        "--calibrated", str(tmp_path / "missing.yaml")), "no such file")


def test_cli_report_calibrates_in_memory(cli, tmp_path: Path, cal: Topology) -> None:
    pytest.importorskip("pkbsim.validation.calibrate")
    folder = _run_dir(tmp_path, cal)
    r = cli("validate", "--report", str(folder))
    assert r.code == 0, r.err
    data = json.loads((folder / "report.json").read_text())
    calibrated = data["provenance"]["calibrated_topology"]
    assert calibrated["file"].startswith("<calibrated from")  # fitted in memory
    assert calibrated["name"] == "dgx-h200-calibrated"
    assert data["overall"]["n_predicted"]["calibrated"] == len(OPS)
