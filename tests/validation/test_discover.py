"""Topology discovery: the `nvidia-smi topo -m` parser on captured text (tests/data/topo/,
SOURCES.md says where each came from), the topology built from it, and `pkbsim discover`."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

import pytest
import yaml
from paths import DATA

from pkbsim.errors import PkbsimError, UsageError
from pkbsim.topology import load_topology
from pkbsim.validation.discover import (
    Discovered,
    DiscoveryError,
    build_topology,
    parse_nvml,
    parse_topo_matrix,
    render_yaml,
)
from pkbsim.validation.results import CaseResult, Results, dumps

DATA = DATA / "topo"
HOST, DATE = "node-a", "2026-12-03T10:00:00+00:00"
TOPO = f"discovered: nvidia-smi topo -m on {HOST}, {DATE}: "
NVML = f"discovered: NVML on {HOST}, {DATE}: "
H100_MEM = 85_520_809_984  # 81,559 MiB, what NVML reports for an H100 80GB HBM3


def text(name: str) -> str:
    return (DATA / name).read_text()


def matrix(name: str):
    return parse_topo_matrix(text(name), name)


def nvml(name: str, n: int, links: int | None = 18, mem: int = H100_MEM) -> dict:
    return {"available": True, "error": None, "driver_version": "570.133.20",
            "gpus": [{"index": i, "name": name, "memory_total_bytes": mem, "pcie_max_gen": 5,
                      "pcie_max_width": 16, "nvlink_active_links": links, "nvlink_version": 6}
                     for i in range(n)]}


def build(name_or_text: str, base: str | None = None, nv: dict | None = None) -> Discovered:
    src = text(name_or_text) if name_or_text.endswith(".txt") else name_or_text
    return build_topology(parse_topo_matrix(src, "capture.txt"), parse_nvml(nv), host=HOST,
                          date=DATE, base=base)


def loaded(found: Discovered, tmp_path: Path):
    path = tmp_path / f"{found.data['name']}.yaml"
    path.write_text(render_yaml(found))
    return load_topology(str(path))


def grid(labels: list[str], cell, info: list[str] | None = None) -> str:
    """A matrix in nvidia-smi's layout; ``cell(a, b)`` gives each off-diagonal entry."""
    head = "        " + "".join(f"{lb:<8}" for lb in labels) + "CPU Affinity    NUMA Affinity"
    rows = [head]
    for a in labels:
        cells = "".join(f"{' X' if a == b else cell(a, b):<8}" for b in labels)
        rows.append(f"{a:<8}{cells}" + ("0-15            0" if a.startswith("GPU") else ""))
    return "\n".join(rows) + "\n"


# ----------------------------------------------------------------------------- parser

def test_nvswitch_node_field_by_field() -> None:
    m = matrix("dgx_h100_nv18_8nic.txt")
    assert m.gpus == tuple(f"GPU{i}" for i in range(8))
    assert m.nics == tuple(f"NIC{i}" for i in range(8))
    for a in m.gpus:
        for b in m.gpus:
            if a != b:
                assert (m.link(a, b), m.kind(a, b), m.nvlinks(a, b)) == ("NV18", "NV", 18)
    assert m.link("GPU0", "GPU0") == "X"
    assert [m.link("GPU0", n) for n in m.nics] == ["PIX", "NODE", "NODE", "NODE"] + ["SYS"] * 4
    assert [m.link("GPU5", n) for n in m.nics] == ["SYS"] * 4 + ["NODE", "PIX", "NODE", "NODE"]
    assert m.link("NIC0", "NIC1") == "NODE" and m.link("NIC3", "NIC4") == "SYS"
    assert m.link("NIC7", "GPU7") == "PIX" and m.nvlinks("GPU0", "NIC0") == 0
    assert [m.near_nics(g) for g in m.gpus] == [(f"NIC{i}",) for i in range(8)]
    assert m.nic_devices == {f"NIC{i}": f"mlx5_{i}" for i in range(8)}
    assert m.cpu_affinity == {**{f"GPU{i}": "0-47,96-143" for i in range(4)},
                              **{f"GPU{i}": "48-95,144-191" for i in range(4, 8)}}
    assert m.numa_affinity == {f"GPU{i}": str(i // 4) for i in range(8)}
    assert m.gpu_numa_id == {f"GPU{i}": None for i in range(8)}  # N/A
    assert m.extra_columns == {}
    assert sorted(m.legend) == ["NODE", "NV#", "PHB", "PIX", "PXB", "SYS", "X"]
    assert m.legend["NV#"] == "Connection traversing a bonded set of # NVLinks"


def test_pcie_node_pair_kinds() -> None:
    m = matrix("pcie_8gpu_pix_node_sys.txt")
    assert len(m.gpus) == 8 and m.nics == () and m.legend == {} and m.nic_devices == {}
    row0 = [m.link("GPU0", g) for g in m.gpus]
    assert row0 == ["X", "PIX", "NODE", "NODE", "SYS", "SYS", "SYS", "SYS"]
    row6 = [m.link("GPU6", g) for g in m.gpus]
    assert row6 == ["SYS", "SYS", "SYS", "SYS", "NODE", "NODE", "X", "PIX"]
    assert all(m.nvlinks(a, b) == 0 for a in m.gpus for b in m.gpus)
    assert m.cpu_affinity["GPU3"] == "0-31,64-95" and m.cpu_affinity["GPU4"] == "32-63,96-127"
    assert m.numa_affinity["GPU7"] == "1"


def test_prompt_line_before_and_nics_without_pix() -> None:
    m = matrix("rtx6000ada_4gpu_4nic.txt")
    assert m.gpus == ("GPU0", "GPU1", "GPU2", "GPU3") and len(m.nics) == 4
    assert m.link("GPU2", "NIC2") == "NODE" and m.link("GPU0", "NIC2") == "SYS"
    assert m.link("NIC0", "NIC1") == "PIX" and m.link("NIC2", "NIC3") == "PIX"
    assert all(m.near_nics(g) == () for g in m.gpus)
    assert m.nic_devices["NIC3"] == "mlx5_3"
    assert m.cpu_affinity == {"GPU0": "0-31", "GPU1": "0-31", "GPU2": "32-63", "GPU3": "32-63"}


def test_tabs_and_no_legend() -> None:
    m = matrix("rtx4090_8gpu_tabs.txt")
    assert len(m.gpus) == 8 and m.nics == ("NIC0", "NIC1")
    assert all(m.link(a, b) == "SYS" for a in m.gpus for b in m.gpus if a != b)
    assert [m.link(g, "NIC0") for g in m.gpus] == ["SYS"] * 6 + ["PHB", "SYS"]
    assert m.link("NIC0", "NIC1") == "PIX"
    assert m.nic_devices == {"NIC0": "NIC0", "NIC1": "NIC1"}  # no NIC legend: the label
    assert m.cpu_affinity["GPU6"] == "56-111,168-223" and m.numa_affinity["GPU0"] == "0"
    assert m.gpu_numa_id["GPU6"] is None


def test_one_gpu_machines() -> None:
    m = matrix("h100_pcie_1gpu_1nic.txt")
    assert (m.gpus, m.nics, m.link("GPU0", "NIC0")) == (("GPU0",), ("NIC0",), "PHB")
    assert m.cpu_affinity == {"GPU0": "0-251"} and m.nic_devices == {"NIC0": "mlx5_0"}
    ansi = matrix("h200_1gpu_ansi.txt")
    assert "\x1b[4m" in text("h200_1gpu_ansi.txt")
    assert (ansi.gpus, ansi.nics, ansi.cpu_affinity) == (("GPU0",), (), {"GPU0": "0-15"})
    assert ansi.numa_affinity == {"GPU0": "0"} and len(ansi.legend) == 7
    plain = parse_topo_matrix(re.sub(r"\x1b\[[0-9;]*m", "", text("h200_1gpu_ansi.txt")))
    assert (plain.gpus, plain.links, plain.cpu_affinity) == (ansi.gpus, ansi.links,
                                                            ansi.cpu_affinity)


def test_old_format_soc_and_device_named_nic() -> None:
    old = ("\tGPU0\tGPU1\tGPU2\tGPU3\tmlx4_0\tCPU Affinity\n"
           "GPU0\t X \tPIX\tSOC\tSOC\tSOC\t0-3\n"
           "GPU1\tPIX\t X \tSOC\tSOC\tSOC\t0-3\n"
           "GPU2\tSOC\tSOC\t X \tPIX\tPHB\t0-3\n"
           "GPU3\tSOC\tSOC\tPIX\t X \tPHB\t0-3\n"
           "mlx4_0\tSOC\tSOC\tPHB\tPHB\t X \n\nLegend:\n\n  X   = Self\n")
    m = parse_topo_matrix(old)
    assert m.nics == ("mlx4_0",) and m.nic_devices == {"mlx4_0": "mlx4_0"}
    assert m.link("GPU0", "GPU2") == "SYS" and m.kind("GPU3", "GPU1") == "SYS"  # SOC = SYS
    assert m.link("GPU2", "mlx4_0") == "PHB" and m.legend == {"X": "Self"}
    assert m.cpu_affinity["GPU3"] == "0-3" and m.numa_affinity == {g: None for g in m.gpus}


def test_unknown_extra_column_is_kept() -> None:
    src = ("        GPU0    GPU1    CPU Affinity    NUMA Affinity   GPU NUMA ID   Future\n"
           "GPU0     X      NV4     0-7     0       N/A     yes\n"
           "GPU1    NV4      X      0-7     0       2       no\n")
    m = parse_topo_matrix(src)
    assert m.extra_columns == {"Future": {"GPU0": "yes", "GPU1": "no"}}
    assert m.gpu_numa_id == {"GPU0": None, "GPU1": "2"} and m.nvlinks("GPU1", "GPU0") == 4


def repaired_a100() -> str:
    fixed = re.sub(r"(SYS|PXB|PIX)(?=SYS|PIX)", r"\1 ", text("a100_nv12_10nic_damaged.txt"))
    return fixed.replace("NIC7NIC8", "NIC7    NIC8")


def test_a100_with_shared_nics_after_repair() -> None:
    m = parse_topo_matrix(repaired_a100())
    assert len(m.gpus) == 8 and len(m.nics) == 10
    assert m.nvlinks("GPU3", "GPU6") == 12
    assert m.near_nics("GPU0") == ("NIC0", "NIC1") and m.near_nics("GPU7") == ("NIC6", "NIC7")
    assert m.link("NIC8", "NIC9") == "PIX" and m.link("GPU6", "NIC8") == "SYS"


# ----------------------------------------------------------------------------- bad input

def one_line_error(src: str, *words: str) -> str:
    with pytest.raises(PkbsimError) as info:
        parse_topo_matrix(src, "cap.txt")
    assert isinstance(info.value, DiscoveryError)
    line = info.value.one_line()
    assert "\n" not in line and line.startswith("cap.txt: ")
    for word in words:
        assert word in line, line
    return line


def test_garbage_is_an_error() -> None:
    one_line_error("hello\nworld\n", "no header line starting with GPU0")
    one_line_error("", "no `nvidia-smi topo -m` matrix")


def test_row_with_a_missing_cell() -> None:
    lines = text("pcie_8gpu_pix_node_sys.txt").splitlines()
    lines[4] = lines[4].replace("PIX", "", 1)  # GPU3 row
    one_line_error("\n".join(lines), "line 5", "row GPU3 has 10 values", "8 devices")


def test_row_with_an_extra_cell() -> None:
    lines = text("pcie_8gpu_pix_node_sys.txt").splitlines()
    lines[2] = lines[2] + "  extra"
    one_line_error("\n".join(lines), "line 3", "row GPU1 has 12 values")


def test_unknown_cell_and_asymmetry_and_self() -> None:
    src = text("pcie_8gpu_pix_node_sys.txt")
    one_line_error(src.replace("GPU2    NODE", "GPU2    FOO", 1), "line 4",
                   "GPU2 to GPU0: unknown link 'FOO'")
    lines = src.splitlines()
    lines[1] = lines[1].replace("PIX", "PXB", 1)
    one_line_error("\n".join(lines), "GPU0 to GPU1 is PXB but GPU1 to GPU0 is PIX")
    lines = src.splitlines()
    lines[1] = lines[1].replace(" X ", "PIX", 1)
    one_line_error("\n".join(lines), "GPU0 to GPU0: 'PIX'; X must mark")


def test_truncated_capture_and_glued_tokens() -> None:
    lines = text("pcie_8gpu_pix_node_sys.txt").splitlines()
    one_line_error("\n".join(lines[:-1]), "no row for GPU7")
    one_line_error(text("a100_nv12_10nic_damaged.txt"), "line 17", "no row for NIC7NIC8")


def test_bad_nvml_data() -> None:
    with pytest.raises(DiscoveryError, match="expected int or null"):
        parse_nvml({"gpus": [{"name": "NVIDIA H100", "memory_total_bytes": "80GB"}]})
    with pytest.raises(DiscoveryError) as info:
        parse_nvml({"gpus": "none"}, "r.json")
    assert info.value.one_line() == "r.json: nvml.gpus: expected a list"
    assert parse_nvml(None) is None
    off = parse_nvml({"available": False, "error": "No module named 'pynvml'"})
    assert off is not None and not off.available and off.gpus == ()


# ----------------------------------------------------------------------------- topology

def leaves(node: object, path: str = "") -> list[str]:
    if not isinstance(node, dict):
        return [path]
    return [leaf for k, v in node.items() for leaf in leaves(v, f"{path}.{k}" if path else k)]


def assert_every_field_sourced(data: dict) -> None:
    sources = data["sources"]
    for leaf in leaves({k: v for k, v in data.items()
                        if k not in ("schema_version", "name", "description", "sources")}):
        keys = [k for k in sources if leaf == k or leaf.startswith(k + ".")]
        assert len(keys) == 1, (leaf, keys)
        assert sources[keys[0]].startswith(("discovered: ", "kept from base ")), leaf


def test_nvswitch_topology(tmp_path: Path) -> None:
    found = build("dgx_h100_nv18_8nic.txt", base="dgx-h100")
    d = found.data
    assert (d["node"]["gpus"], d["scale_up"]["fabric"], d["scale_up"]["links_per_gpu"]) == (
        8, "nvswitch", 18)
    assert d["scale_out"]["nics_per_gpu"] == 1 and "nvls_multimem" in d["mechanisms"]
    src = d["sources"]
    assert src["node.gpus"] == TOPO + "8 GPU rows (GPU0..GPU7)"
    assert src["scale_up.links_per_gpu"] == TOPO + "NV18 between every GPU pair"
    assert src["scale_out.nics_per_gpu"].startswith(TOPO + "NICs within PIX/PXB")
    assert "GPU3: NIC3 (mlx5_3) PIX" in src["scale_out.nics_per_gpu"]
    assert src["scale_up.link_bandwidth_GBps"].startswith("kept from base dgx-h100: ")
    assert src["gpu.peak_tflops"].startswith("kept from base dgx-h100: ")
    assert_every_field_sourced(d)
    topo = loaded(found, tmp_path)
    assert (topo.gpus_per_node, topo.peer_line_rate_GBps) == (8, 450)
    assert topo.scale_out is not None and topo.scale_out.nics_per_gpu == 1
    text_out = render_yaml(found)
    assert text_out.startswith("# Discovered by `pkbsim discover` from nvidia-smi topo -m on "
                               f"{HOST}, {DATE}.\n# Base: dgx-h100.")


def test_nvml_picks_the_base_and_sets_memory_and_host_link(tmp_path: Path) -> None:
    found = build("dgx_h100_nv18_8nic.txt", nv=nvml("NVIDIA H100 80GB HBM3", 8))
    assert found.base == "dgx-h100"
    gpu, src = found.data["gpu"], found.data["sources"]
    assert gpu["model"] == "H100 80GB HBM3" and gpu["hbm_capacity_GB"] == 85.5
    assert found.data["pcie"]["gpu_link_GBps"] == 64
    assert src["gpu.model"] == NVML + "device name 'NVIDIA H100 80GB HBM3'"
    assert src["pcie.gpu_link_GBps"] == NVML + ("max PCIe link Gen5 x16 = 64 GB/s per "
                                                "direction (nominal 4 GB/s per lane)")
    assert src["scale_up.links_per_gpu"].endswith("NVML: 18 active NVLinks per GPU")
    assert loaded(found, tmp_path).gpu.hbm_capacity_GB == 85.5
    assert found.notes == ()
    nv = nvml("NVIDIA H100 80GB HBM3", 8)
    nv["gpus"][2]["nvlink_active_links"] = 17
    assert build("dgx_h100_nv18_8nic.txt", nv=nv).notes == (
        "NVML's active NVLinks differ between GPUs ([17, 18]): a link may be down",)


def test_mixed_models_and_missing_name() -> None:
    nv = nvml("NVIDIA H100 80GB HBM3", 8)
    nv["gpus"][3]["name"] = "NVIDIA H200"
    with pytest.raises(DiscoveryError, match="mixed GPU models"):
        build("dgx_h100_nv18_8nic.txt", nv=nv)
    with pytest.raises(UsageError, match="--base"):
        build("dgx_h100_nv18_8nic.txt")


def test_pcie_tree_on_a_pcie_base(tmp_path: Path) -> None:
    found = build("pcie_8gpu_pix_node_sys.txt", base="pcie-l40s-8")
    p, src = found.data["pcie"], found.data["sources"]
    assert (p["gpus_per_switch"], p["switches_per_socket"], p["sockets"]) == (2, 2, 2)
    assert src["pcie.sockets"].startswith(TOPO + "GPUs sharing PIX/PXB form a switch")
    assert found.data["scale_up"]["fabric"] == "pcie"
    assert src["pcie.switch_uplink_GBps"].startswith("kept from base pcie-l40s-8: ")
    assert sorted(found.data["mechanisms"]) == ["copy_engine", "nccl_ll", "nccl_simple",
                                                "sm_ldst"]
    assert found.notes == ("no NICs in the matrix: scale_out kept from the base",)
    assert_every_field_sourced(found.data)
    topo = loaded(found, tmp_path)
    assert (topo.pcie.gpus_per_switch, topo.pcie.sockets, topo.peer_line_rate_GBps) == (2, 2, 32)


def test_pcie_matrix_on_an_nvlink_base(tmp_path: Path) -> None:
    found = build("pcie_8gpu_pix_node_sys.txt", base="dgx-h100")
    up = found.data["scale_up"]
    assert (up["fabric"], up["links_per_gpu"], up["in_switch_reduction"], up["multicast"]) == (
        "pcie", 0, False, False)
    assert "nvls_multimem" not in found.data["mechanisms"]
    assert "nccl_ll128" not in found.data["mechanisms"]
    assert any("nvls_multimem left out" in n for n in found.notes)
    assert any("describe NVLink" in n for n in found.notes)
    topo = loaded(found, tmp_path)
    assert topo.scale_up.fabric == "pcie" and topo.pcie.switches_per_socket == 2


@pytest.mark.parametrize(("name", "tree"), [("rtx6000ada_4gpu_4nic.txt", (1, 2, 2)),
                                            ("rtx4090_8gpu_tabs.txt", (1, 1, 8))])
def test_pcie_trees_of_other_boxes(name: str, tree: tuple[int, int, int], tmp_path: Path) -> None:
    found = build(name, base="pcie-l40s-8")
    p = found.data["pcie"]
    assert (p["gpus_per_switch"], p["switches_per_socket"], p["sockets"]) == tree
    assert "no NIC within PIX/PXB of a GPU: scale_out kept from the base" in found.notes
    assert loaded(found, tmp_path).total_gpus == tree[0] * tree[1] * tree[2]


def test_irregular_pcie_tree() -> None:
    kinds = {("GPU0", "GPU1"): "PIX", ("GPU1", "GPU2"): "PIX", ("GPU0", "GPU2"): "PHB"}

    def cell(a: str, b: str) -> str:
        return kinds.get((a, b)) or kinds.get((b, a)) or "SYS"

    src = grid(["GPU0", "GPU1", "GPU2", "GPU3"], cell)
    with pytest.raises(DiscoveryError, match="holds 8 GPUs, not 4"):
        build(src, base="pcie-l40s-8")
    found = build(src, base="dgx-h100")  # no tree fields: defaults, said so
    assert "gpus_per_switch" not in found.data["pcie"]
    assert any(n.startswith("PCIe tree not derived (switches: GPU1-GPU2 PIX breaks")
               for n in found.notes)


def test_one_gpu_h200(tmp_path: Path) -> None:
    found = build("h200_1gpu_ansi.txt", nv=nvml("NVIDIA H200", 1, links=0, mem=150_754_820_096))
    d = found.data
    assert found.base == "dgx-h200" and d["node"]["gpus"] == 1
    assert d["gpu"]["model"] == "H200" and d["gpu"]["hbm_capacity_GB"] == 150.8
    assert d["scale_up"]["fabric"] == "nvswitch"  # kept: nothing to discover
    assert d["sources"]["scale_up.fabric"].startswith("kept from base dgx-h200: ")
    assert "one GPU: no peers to discover, scale_up kept from the base" in found.notes
    assert_every_field_sourced(d)
    assert loaded(found, tmp_path).total_gpus == 1
    pcie = build("h200_1gpu_ansi.txt", base="pcie-l40s-8").data["pcie"]
    assert (pcie["gpus_per_switch"], pcie["switches_per_socket"], pcie["sockets"]) == (1, 1, 1)


def test_a100_shared_nics(tmp_path: Path) -> None:
    found = build(repaired_a100(), base="dgx-a100")
    assert found.data["scale_up"]["links_per_gpu"] == 12
    assert found.data["scale_out"]["nics_per_gpu"] == 1  # 2 NICs per 2 GPUs
    assert "GPU0: NIC0 (mlx5_0) PXB, NIC1 (mlx5_1) PXB" in \
        found.data["sources"]["scale_out.nics_per_gpu"]
    assert loaded(found, tmp_path).peer_line_rate_GBps == 300


def two_gpus(k: int) -> str:
    return grid(["GPU0", "GPU1"], lambda a, b: f"NV{k}")


def test_two_bridged_gpus(tmp_path: Path) -> None:
    bridged = build(two_gpus(12), base="dgx-h100")
    up = bridged.data["scale_up"]
    assert (up["fabric"], up["links_per_gpu"], up["in_switch_reduction"]) == ("nvswitch", 12,
                                                                             False)
    assert "nvls_multimem" not in bridged.data["mechanisms"]
    assert "two GPUs: either way" in bridged.data["sources"]["scale_up.fabric"]
    assert bridged.data["sources"]["scale_up.multicast"] == TOPO + (
        "two GPUs joined by NV12, not the base's 18 links: no NVSwitch")
    assert loaded(bridged, tmp_path).peer_line_rate_GBps == 300
    sliced = build(two_gpus(18), base="dgx-h100")  # two GPUs of an HGX: NVLS kept
    assert sliced.data["scale_up"]["in_switch_reduction"] is True
    assert "nvls_multimem" in sliced.data["mechanisms"]


def test_direct_meshes_and_partial_meshes() -> None:
    four = ["GPU0", "GPU1", "GPU2", "GPU3"]
    mesh = grid(four, lambda a, b: "NV4")
    with pytest.raises(DiscoveryError, match="direct NVLink mesh, no NVSwitch"):
        build(mesh, base="dgx-a100", nv=nvml("NVIDIA A100-SXM4-80GB", 4, links=12))
    with pytest.raises(DiscoveryError, match="cannot tell an NVSwitch from a direct mesh"):
        build(mesh, base="dgx-h100")
    found = build(grid(four, lambda a, b: "NV18"), base="dgx-h100")  # 4 of an HGX's 8
    assert found.data["scale_up"]["links_per_gpu"] == 18
    pairs = grid(four, lambda a, b: "NV4" if {a, b} in ({"GPU0", "GPU1"}, {"GPU2", "GPU3"})
                 else "SYS")
    with pytest.raises(DiscoveryError, match=r"only some GPU pairs .*GPU0-GPU1 NV4"):
        build(pairs, base="dgx-h100")
    hybrid = grid(four, lambda a, b: "NV2" if {a, b} == {"GPU0", "GPU3"} else "NV1")
    with pytest.raises(DiscoveryError, match=r"different NVLink counts \(NV1, NV2\)"):
        build(hybrid, base="dgx-h100")
    with pytest.raises(DiscoveryError, match="has no NVLink bandwidth"):
        build("dgx_h100_nv18_8nic.txt", base="pcie-l40s-8")


# ----------------------------------------------------------------------------- the CLI

def results_file(tmp_path: Path, data: dict, status: str = "ok") -> Path:
    case = CaseResult("topology.discover", "topology", 1, status, data=data,
                      error=None if status == "ok" else "nvidia-smi not found")
    run = Results({"hostname": "env-host", "date": "2026-12-01", "gpu_name": "NVIDIA H100"},
                  (case,))
    path = tmp_path / "results.json"
    path.write_text(dumps(run))
    return path


def test_cli_from_captured_text(cli, tmp_path: Path) -> None:
    out = tmp_path / "x.yaml"
    r = cli("discover", "--from", str(DATA / "dgx_h100_nv18_8nic.txt"), "--base", "dgx-h100",
            "--out", str(out))
    assert r.code == 0, r.err
    assert r.out.startswith(f"wrote {out}: 8 x H100 SXM5 80GB, nvswitch fabric (18 NVLinks")
    topo = load_topology(str(out))
    assert (topo.name, topo.gpus_per_node, topo.scale_up.links_per_gpu) == ("x", 8, 18)
    assert topo.sources["node.gpus"].startswith(
        "discovered: nvidia-smi topo -m on the host of dgx_h100_nv18_8nic.txt, ")


def test_cli_prints_without_out(cli) -> None:
    r = cli("discover", "--from", str(DATA / "pcie_8gpu_pix_node_sys.txt"), "--base",
            "pcie-l40s-8")
    assert r.code == 0, r.err
    data = yaml.safe_load(r.out)
    assert data["name"] == "discovered-pcie_8gpu_pix_node_sys"
    assert data["pcie"]["sockets"] == 2


def test_cli_from_results_json(cli, tmp_path: Path) -> None:
    data = {"topo_matrix": text("dgx_h100_nv18_8nic.txt"),
            "nvml": nvml("NVIDIA H100 80GB HBM3", 8), "hostname": HOST, "date": DATE}
    out = tmp_path / "node.yaml"
    r = cli("discover", "--from", str(results_file(tmp_path, data)), "--out", str(out))
    assert r.code == 0, r.err
    topo = load_topology(str(out))
    assert topo.gpu.model == "H100 80GB HBM3"  # base chosen by NVML's name: dgx-h100
    assert topo.sources["gpu.hbm_capacity_GB"].startswith(NVML)
    assert topo.sources["gpu.sm_count"].startswith(
        "kept from base dgx-h100: ")


def test_cli_from_probe_lines(cli, tmp_path: Path) -> None:
    raw = tmp_path / "probe.jsonl"
    raw.write_text(json.dumps({"data": {"topo_matrix": text("h200_1gpu_ansi.txt"),
                                        "nvml": nvml("NVIDIA H200", 1, links=0)}}) + "\n"
                   + json.dumps({"data": {"hostname": HOST, "date": DATE}}) + "\n")
    r = cli("discover", "--from", str(raw))
    assert r.code == 0, r.err
    data = yaml.safe_load(r.out)
    assert data["node"]["gpus"] == 1 and data["sources"]["node.gpus"].startswith(TOPO)


@pytest.mark.parametrize(("content", "words"), [
    ("hello world\n", ["no header line starting with GPU0"]),
    (None, ["no such file"]),
])
def test_cli_bad_file(cli, tmp_path: Path, content: str | None, words: list[str]) -> None:
    bad = tmp_path / "bad.txt"
    if content is not None:
        bad.write_text(content)
    out = tmp_path / "keep.yaml"
    out.write_text("precious\n")
    r = cli("discover", "--from", str(bad), "--base", "dgx-h100", "--out", str(out))
    assert r.code == 2 and r.out == ""
    assert r.err.count("\n") == 1 and r.err.startswith("pkbsim: error: ")
    assert str(bad) in r.err and all(w in r.err for w in words)
    assert out.read_text() == "precious\n"  # a failed run never touches --out


def test_cli_results_without_a_capture(cli, tmp_path: Path) -> None:
    failed = results_file(tmp_path, {"topo_matrix": None, "topo_error": "nvidia-smi not found"},
                          "failed")
    r = cli("discover", "--from", str(failed), "--base", "dgx-h100")
    assert r.code == 2 and "no `nvidia-smi topo -m` text: nvidia-smi not found" in r.err
    empty = tmp_path / "other" / "results.json"
    empty.parent.mkdir()
    empty.write_text(dumps(Results({}, ())))
    r = cli("discover", "--from", str(empty))
    assert r.code == 2 and "no topology.discover case" in r.err


# ----------------------------------------------------------------------------- the probe

FAKE_PYNVML = '''
class _Obj:
    def __init__(self, **kw):
        self.__dict__.update(kw)
def nvmlInit(): pass
def nvmlShutdown(): pass
def nvmlSystemGetDriverVersion(): return "570.133.20"
def nvmlSystemGetNVMLVersion(): return "12.570.133.20"
def nvmlSystemGetCudaDriverVersion(): return 12080
def nvmlDeviceGetCount(): return 8
def nvmlDeviceGetHandleByIndex(i): return i
def nvmlDeviceGetName(h): return b"NVIDIA H100 80GB HBM3"
def nvmlDeviceGetUUID(h): return f"GPU-{h}"
def nvmlDeviceGetPciInfo(h): return _Obj(busId=f"00000000:{h:02x}:00.0")
def nvmlDeviceGetMemoryInfo(h): return _Obj(total=85520809984)
def nvmlDeviceGetCudaComputeCapability(h): return (9, 0)
def nvmlDeviceGetMaxPcieLinkGeneration(h): return 5
def nvmlDeviceGetMaxPcieLinkWidth(h): return 16
def nvmlDeviceGetCurrPcieLinkGeneration(h): raise RuntimeError("Not Supported")
def nvmlDeviceGetCurrPcieLinkWidth(h): return 16
def nvmlDeviceGetNvLinkState(h, link): return 1
def nvmlDeviceGetNvLinkVersion(h, link): return 6
'''


def fake_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, smi: str,
                 pynvml: bool = True) -> None:
    """A fake `nvidia-smi` on PATH (and a fake pynvml) for the real probe script."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "nvidia-smi"
    tool.write_text("#!/bin/sh\n" + smi)
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    if pynvml:
        (bin_dir / "pynvml.py").write_text(FAKE_PYNVML)
        monkeypatch.setenv("PYTHONPATH", str(bin_dir))
    monkeypatch.delenv("PKBSIM_VALIDATE_DIR", raising=False)


def test_cli_runs_the_probe(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_machine(tmp_path, monkeypatch, f"cat '{DATA / 'dgx_h100_nv18_8nic.txt'}'\n")
    out = tmp_path / "here.yaml"
    r = cli("discover", "--out", str(out))
    assert r.code == 0, r.err
    topo = load_topology(str(out))
    assert topo.gpu.model == "H100 80GB HBM3" and topo.gpus_per_node == 8
    assert topo.scale_up.links_per_gpu == 18 and topo.pcie.gpu_link_GBps == 64
    assert topo.sources["scale_up.links_per_gpu"].endswith("NVML: 18 active NVLinks per GPU")


def test_probe_failure_and_timeout(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pkbsim.validation.capture import run_probe

    fake_machine(tmp_path, monkeypatch, "echo 'NVIDIA-SMI has failed' >&2\nexit 9\n",
                 pynvml=False)
    r = cli("discover", "--base", "dgx-h100")
    assert r.code == 2 and r.err.count("\n") == 1
    assert "nvidia-smi topo -m exited 9: NVIDIA-SMI has failed" in r.err
    (tmp_path / "bin" / "nvidia-smi").write_text("#!/bin/sh\nexec sleep 3\n")
    with pytest.raises(DiscoveryError, match=r"timed out after 0\.5 s"):
        run_probe(timeout_s=0.5)
