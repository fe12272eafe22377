from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from paths import ROOT

from pkbsim.errors import TopologyError
from pkbsim.topology import list_topologies, load_topology
from pkbsim.topology.loader import parse_topology

SHIPPED = ["dgx-h100", "dgx-h200", "hgx-b200", "gb200-nvl72", "dgx-a100", "pcie-l40s-8",
           "h100-ib-2node"]


def test_every_required_topology_ships() -> None:
    assert set(SHIPPED) <= set(list_topologies())


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_topology_loads(name: str) -> None:
    topo = load_topology(name)
    assert topo.name == name
    assert topo.peer_line_rate_GBps > 0
    assert all(0 < m.efficiency <= 1 for m in topo.mechanisms.values())


def _leaves(prefix: str, value: object) -> list[str]:
    if isinstance(value, dict):
        out: list[str] = []
        for k, v in value.items():
            out += _leaves(f"{prefix}.{k}" if prefix else str(k), v)
        return out
    return [prefix]


@pytest.mark.parametrize("name", SHIPPED)
def test_every_parameter_has_a_source(name: str) -> None:
    data = yaml.safe_load((ROOT / "topologies" / f"{name}.yaml").read_text())
    sources = data.pop("sources")
    for meta in ("schema_version", "name", "description"):
        data.pop(meta)
    missing = [leaf for leaf in _leaves("", data)
               if not any(leaf == k or leaf.startswith(k + ".") for k in sources)]
    assert missing == [], f"{name}: no source for {missing}"
    assert all(isinstance(v, str) and len(v) > 10 for v in sources.values())


def test_known_values_of_dgx_h100() -> None:
    t = load_topology("dgx-h100")
    assert t.scale_up.bandwidth_GBps == 450  # 18 links x 25 GB/s, one direction
    assert t.scale_up.in_switch_reduction
    assert t.gpu.peak_tflops["bf16_tensor"] == 989.4
    assert t.total_gpus == 8


def test_a100_and_pcie_have_no_nvls() -> None:
    for name in ("dgx-a100", "pcie-l40s-8"):
        t = load_topology(name)
        assert not t.scale_up.in_switch_reduction
        assert "nvls_multimem" not in t.mechanisms and "tma" not in t.mechanisms


def test_two_node_topology() -> None:
    t = load_topology("h100-ib-2node")
    assert (t.nodes, t.gpus_per_node) == (2, 8)
    assert t.scale_out is not None and t.scale_out.nic_bandwidth_GBps == 50


def _mutate(data: dict, path: str, value: object) -> dict:
    out = copy.deepcopy(data)
    node = out
    parts = path.split(".")
    for part in parts[:-1]:
        node = node[part]
    if value is _DELETE:
        del node[parts[-1]]
    else:
        node[parts[-1]] = value
    return out


_DELETE = object()


@pytest.mark.parametrize(
    ("path", "value", "field", "message"),
    [
        ("gpu.sm_count", _DELETE, "gpu.sm_count", "required but missing"),
        ("gpu.sm_count", "lots", "gpu.sm_count", "expected an integer"),
        ("gpu.hbm_bandwidth_GBps", -1, "gpu.hbm_bandwidth_GBps", "expected a number >= 0.001"),
        ("gpu.colour", "green", "gpu.colour", "unknown field"),
        ("mechanisms.tma.efficiency", 1.5, "mechanisms.tma.efficiency", "<= 1"),
        ("mechanisms.warp_drive", {"efficiency": 1}, "mechanisms.warp_drive",
         "unknown mechanism"),
        ("scale_up.in_switch_reduction", False, "mechanisms.nvls_multimem",
         "needs scale_up.in_switch_reduction"),
        ("scale_up.fabric", "ethernet", "scale_up.fabric", "expected one of nvswitch, pcie"),
        ("node.count", 2, "scale_out", None),
        ("schema_version", 9, "schema_version", "expected 1"),
        ("gpu.peak_tflops.bf16_tensor", _DELETE, "gpu.peak_tflops.bf16_tensor", "required"),
    ],
)
def test_bad_topology_names_file_and_field(h100_data: dict, write_yaml, path: str,
                                           value: object, field: str, message: str | None
                                           ) -> None:
    data = _mutate(h100_data, path, value)
    if path == "node.count":
        del data["scale_out"]
    file = write_yaml(data)
    with pytest.raises(TopologyError) as info:
        load_topology(str(file))
    err = info.value
    assert err.file == str(file)
    assert err.field == field
    if message:
        assert message in err.message


def test_pcie_tree_must_match_gpu_count(write_yaml) -> None:
    data = yaml.safe_load((ROOT / "topologies" / "pcie-l40s-8.yaml").read_text())
    data["pcie"]["gpus_per_switch"] = 3
    with pytest.raises(TopologyError, match=r"but node\.gpus is 8"):
        load_topology(str(write_yaml(data)))


def test_not_yaml(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(TopologyError, match="not valid YAML at line"):
        load_topology(str(bad))


def test_top_level_must_be_mapping(tmp_path: Path) -> None:
    bad = tmp_path / "list.yaml"
    bad.write_text("- 1\n- 2\n")
    with pytest.raises(TopologyError, match="mapping at the top level"):
        load_topology(str(bad))


def test_unknown_name_suggests() -> None:
    with pytest.raises(TopologyError, match="did you mean dgx-h100"):
        load_topology("dgx-h10")


def test_overrides_replace_existing_fields_only() -> None:
    t = load_topology("dgx-h100", {"scale_up.link_bandwidth_GBps": 50})
    assert t.scale_up.bandwidth_GBps == 900
    with pytest.raises(TopologyError, match="no such topology field"):
        load_topology("dgx-h100", {"scale_up.warp": 1})
    with pytest.raises(TopologyError, match="section, not a value"):
        load_topology("dgx-h100", {"scale_up": 1})
    with pytest.raises(TopologyError, match="expected a number"):
        load_topology("dgx-h100", {"scale_up.link_bandwidth_GBps": "fast"})


def test_parse_is_pure(h100_data: dict) -> None:
    a = parse_topology(h100_data, "x.yaml")
    b = parse_topology(h100_data, "x.yaml")
    assert a == b


def test_docs_table_of_shipped_topologies_is_true() -> None:
    """docs/topologies.md lists each topology's line rate and mechanisms; keep it true."""
    text = (ROOT / "docs" / "topologies.md").read_text()
    for name in SHIPPED:
        topo = load_topology(name)
        (row,) = [line for line in text.splitlines() if line.startswith(f"| `{name}` |")]
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[2].startswith(f"{topo.peer_line_rate_GBps:g}")
        assert cells[3] == ("yes" if topo.scale_up.in_switch_reduction else "no")
        listed = [m.strip() for m in cells[4].split("(")[0].split(",")]
        assert listed == list(topo.mechanisms), name
