"""Read `nvidia-smi topo -m` (and NVML) into a topology file. Pure: text in, values out.

``parse_topo_matrix`` reads the matrix nvidia-smi prints: a header of device columns (GPU0..,
NIC0.. or old-style device names such as mlx5_0) followed by CPU Affinity, NUMA Affinity and
GPU NUMA ID; one row per device whose cells say how two devices connect (X self, NV# a bonded
set of # NVLinks, PIX/PXB/PHB/NODE/SYS ever longer PCIe paths, SOC the old name of SYS); then
the legend and the "NIC Legend" (NIC0: mlx5_0). Tabs, ANSI escapes, text before the header and
after the matrix are tolerated. ``parse_nvml`` reads what validate/discover_probe.py got from
NVML. ``build_topology`` starts from a base topology (per-GPU numbers, latencies, mechanisms)
and sets what the capture shows: GPU count, fabric, NVLinks per GPU, the PCIe tree, NICs per
GPU, device memory and the host link; ``sources:`` says for every field where it came from.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pkbsim.errors import PkbsimError, TopologyError, UsageError
from pkbsim.fields import load_yaml, yaml_text
from pkbsim.topology.loader import find_topology, parse_topology
from pkbsim.topology.schema import Topology
from pkbsim.validation.bases import base_for_gpu

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_CELL = re.compile(r"^(?:X|NV(\d{1,4})|PIX|PXB|PHB|NODE|SYS|SOC)$")
_GPU = re.compile(r"^GPU(\d{1,6})$")
_INFO_COLUMNS = (("CPU", "Affinity"), ("NUMA", "Affinity"), ("GPU", "NUMA", "ID"))
NEAR = ("PIX", "PXB")  # a NIC this close to a GPU serves it without a host bridge
MAX_NVLINKS_PER_GPU = 18  # H100, H200, B200: no GPU to date has more NVLinks
# Nominal PCIe rate per lane and direction by generation, GB/s, rounded as the shipped files
# round them (Gen4 x16 = 32, Gen5 x16 = 64).
PCIE_LANE_GBps = {1: 0.25, 2: 0.5, 3: 1.0, 4: 2.0, 5: 4.0, 6: 8.0}


class DiscoveryError(PkbsimError):
    """Captured topology text or NVML data cannot be read, or cannot become a topology."""


@dataclass(frozen=True)
class TopoMatrix:
    """The parsed `nvidia-smi topo -m`. Links hold cells as printed (SOC read as SYS)."""

    gpus: tuple[str, ...]
    nics: tuple[str, ...]
    links: Mapping[tuple[str, str], str] = field(hash=False)
    cpu_affinity: Mapping[str, str | None] = field(hash=False)
    numa_affinity: Mapping[str, str | None] = field(hash=False)
    gpu_numa_id: Mapping[str, str | None] = field(hash=False)
    extra_columns: Mapping[str, Mapping[str, str]] = field(hash=False)  # unknown columns
    nic_devices: Mapping[str, str] = field(hash=False)  # NIC0 -> mlx5_0
    legend: Mapping[str, str] = field(hash=False)
    file: str = ""

    def link(self, a: str, b: str) -> str:
        return self.links[(a, b)]

    def kind(self, a: str, b: str) -> str:
        """'NV' for any NVLink count, else the PCIe path name."""
        cell = self.links[(a, b)]
        return "NV" if cell.startswith("NV") else cell

    def nvlinks(self, a: str, b: str) -> int:
        cell = self.links[(a, b)]
        return int(cell[2:]) if cell.startswith("NV") else 0

    def near_nics(self, gpu: str) -> tuple[str, ...]:
        return tuple(n for n in self.nics if self.links[(gpu, n)] in NEAR)


@dataclass(frozen=True)
class NvmlGpu:
    index: int
    name: str | None
    memory_total_bytes: int | None = None
    pcie_max_gen: int | None = None
    pcie_max_width: int | None = None
    nvlink_active_links: int | None = None
    nvlink_version: int | None = None  # NVML's code: unreliable across drivers, recorded only


@dataclass(frozen=True)
class NvmlInfo:
    available: bool
    error: str | None
    driver_version: str | None
    gpus: tuple[NvmlGpu, ...]


@dataclass(frozen=True)
class Discovered:
    """A topology as a plain mapping (the YAML schema), its base, and what to tell the user."""

    data: dict[str, Any] = field(hash=False)
    base: str
    notes: tuple[str, ...]
    header: tuple[str, ...]


# ----------------------------------------------------------------------------- the matrix

def parse_topo_matrix(text: str, file: str = "<nvidia-smi topo -m>") -> TopoMatrix:
    lines = _ANSI.sub("", text).replace("\r", "").split("\n")

    def fail(line: int | None, message: str) -> DiscoveryError:
        return DiscoveryError(message, file=file, field=f"line {line + 1}" if line is not None
                              else None)

    start = next((i for i, ln in enumerate(lines) if _is_header(ln.split())), None)
    if start is None:
        raise fail(None, "no `nvidia-smi topo -m` matrix: no header line starting with GPU0")
    devices, info = _header(lines[start].split())
    rows: dict[str, tuple[int, list[str], list[str]]] = {}
    end = start + 1
    while end < len(lines) and (tokens := lines[end].split()) and tokens[0] in devices:
        if tokens[0] in rows:
            raise fail(end, f"second row for {tokens[0]}")
        cells, extra = tokens[1:1 + len(devices)], tokens[1 + len(devices):]
        if len(cells) < len(devices) or (extra and len(extra) != len(info)) or (
                _GPU.match(tokens[0]) and len(extra) != len(info)):
            raise fail(end, f"row {tokens[0]} has {len(tokens) - 1} values; the header names "
                            f"{len(devices)} devices and {len(info)} more columns "
                            f"({', '.join(info) or 'none'})")
        rows[tokens[0]] = (end, cells, extra)
        end += 1
    missing = [d for d in devices if d not in rows]
    if missing:
        raise fail(end if end < len(lines) else None,
                   f"no row for {', '.join(missing)} (the matrix ends here)")
    gpus = tuple(d for d in devices if _GPU.match(d))
    if [int(m.group(1)) for g in gpus if (m := _GPU.match(g))] != list(range(len(gpus))):
        raise fail(start, f"GPU columns must be GPU0..GPU{len(gpus) - 1}, got {', '.join(gpus)}")
    links = _links(devices, rows, fail)
    per_gpu = {name: {g: rows[g][2][i] for g in gpus} for i, name in enumerate(info)}
    known = {" ".join(c): c for c in _INFO_COLUMNS}

    def column(name: str) -> dict[str, str | None]:
        values = per_gpu.get(name, {})
        return {g: (None if values.get(g) in (None, "N/A") else values[g]) for g in gpus}

    legend, nic_legend = _legends(lines[end:])
    nics = tuple(d for d in devices if not _GPU.match(d))
    return TopoMatrix(
        gpus=gpus, nics=nics, links=links, cpu_affinity=column("CPU Affinity"),
        numa_affinity=column("NUMA Affinity"), gpu_numa_id=column("GPU NUMA ID"),
        extra_columns={k: v for k, v in per_gpu.items() if k not in known},
        nic_devices={n: nic_legend.get(n, n) for n in nics}, legend=legend, file=file)


def _is_header(tokens: list[str]) -> bool:
    return bool(tokens) and tokens[0] == "GPU0" and (len(tokens) == 1 or tokens[1] != "X")


def _header(tokens: list[str]) -> tuple[list[str], list[str]]:
    """(device columns, the names of the columns after them)."""
    devices: list[str] = []
    info: list[str] = []
    i = 0
    while i < len(tokens):
        name = next((c for c in _INFO_COLUMNS if tuple(tokens[i:i + len(c)]) == c), None)
        if name is not None:
            info.append(" ".join(name))
            i += len(name)
        elif info:  # an unknown column after the known ones: one word each
            info.append(tokens[i])
            i += 1
        else:
            devices.append(tokens[i])
            i += 1
    return devices, info


def _links(devices: list[str], rows: Mapping[str, tuple[int, list[str], list[str]]],
           fail: Callable[[int | None, str], DiscoveryError]) -> dict[tuple[str, str], str]:
    links: dict[tuple[str, str], str] = {}
    for a in devices:
        line, cells, _ = rows[a]
        for b, cell in zip(devices, cells, strict=True):
            if not _CELL.match(cell):
                raise fail(line, f"{a} to {b}: unknown link {cell!r} (expected X, NV#, PIX, "
                                 f"PXB, PHB, NODE or SYS)")
            if (cell == "X") != (a == b):
                raise fail(line, f"{a} to {b}: {cell!r}; X must mark each device's own column")
            links[(a, b)] = "SYS" if cell == "SOC" else cell
    for (a, b), cell in links.items():
        if links[(b, a)] != cell:
            raise fail(rows[a][0], f"{a} to {b} is {cell} but {b} to {a} is {links[(b, a)]}")
    return links


def _legends(lines: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    """The legend (code -> meaning) and the NIC legend (NIC0 -> device) after the matrix."""
    legend: dict[str, str] = {}
    nics: dict[str, str] = {}
    mode = ""
    for line in lines:
        text = line.strip()
        if text in ("Legend:", "NIC Legend:"):
            mode = text
        elif mode == "Legend:" and (m := re.match(r"^(\S+)\s*=\s*(.+)$", text)):
            legend[m.group(1)] = m.group(2)
        elif mode == "NIC Legend:" and (m := re.match(r"^(NIC\d+)\s*:\s*(\S+)$", text)):
            nics[m.group(1)] = m.group(2)
    return legend, nics


# ----------------------------------------------------------------------------- NVML

def parse_nvml(raw: Any, file: str = "<nvml>") -> NvmlInfo | None:
    """The ``nvml`` object of discover_probe.py's line; None where there is none."""
    if raw is None:
        return None

    def get(obj: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
        value = obj.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, kind)):
            raise DiscoveryError(f"expected {kind.__name__} or null, got {value!r}", file=file,
                                 field=f"{where}{key}")
        return value

    if not isinstance(raw, Mapping):
        raise DiscoveryError("expected an object", file=file, field="nvml")
    gpus_raw = raw.get("gpus", [])
    if not isinstance(gpus_raw, list):
        raise DiscoveryError("expected a list", file=file, field="nvml.gpus")
    gpus = []
    for i, g in enumerate(gpus_raw):
        where = f"nvml.gpus[{i}]."
        if not isinstance(g, Mapping):
            raise DiscoveryError("expected an object", file=file, field=where[:-1])
        index = get(g, "index", int, where)
        gpus.append(NvmlGpu(
            i if index is None else index, get(g, "name", str, where),
            get(g, "memory_total_bytes", int, where), get(g, "pcie_max_gen", int, where),
            get(g, "pcie_max_width", int, where), get(g, "nvlink_active_links", int, where),
            get(g, "nvlink_version", int, where)))
    return NvmlInfo(bool(raw.get("available", True)), get(raw, "error", str, "nvml."),
                    get(raw, "driver_version", str, "nvml."), tuple(gpus))


def gpu_name(nvml: NvmlInfo | None) -> str | None:
    """The one GPU model NVML reports; mixed models are an error."""
    names = sorted({g.name for g in nvml.gpus if g.name}) if nvml else []
    if len(names) > 1:
        raise DiscoveryError(f"mixed GPU models ({', '.join(names)}): a topology holds one",
                             field="nvml.gpus")
    return names[0] if names else None


# ----------------------------------------------------------------------------- the topology

class _Builder:
    """Edits a copy of the base file's mapping and records where each changed field came from."""

    def __init__(self, base_name: str, matrix: TopoMatrix, nvml: NvmlInfo | None) -> None:
        path = find_topology(base_name)
        raw, _ = load_yaml(path, TopologyError)
        self.base: Topology = parse_topology(raw, str(path))
        self.base_name = base_name
        self.base_sources = {str(k): str(v) for k, v in (raw.get("sources") or {}).items()}
        self.data: dict[str, Any] = copy.deepcopy({k: v for k, v in raw.items()
                                                    if k != "sources"})
        self.m, self.nvml = matrix, nvml
        self.found: dict[str, tuple[str, str]] = {}  # field -> (tool, detail)
        self.notes: list[str] = []

    def set(self, path: str, value: Any, tool: str, detail: str) -> None:
        *parents, last = path.split(".")
        node = self.data
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
        self.found[path] = (tool, detail)

    def drop_mechanism(self, name: str, why: str) -> None:
        if self.data["mechanisms"].pop(name, None) is not None:
            self.notes.append(f"mechanism {name} left out: {why}")


def build_topology(matrix: TopoMatrix, nvml: NvmlInfo | None, *, host: str, date: str,
                   base: str | None = None, name: str | None = None) -> Discovered:
    """The topology the capture shows, on top of ``base`` (default: chosen by GPU name)."""
    model = gpu_name(nvml)
    if base is None:
        if model is None:
            raise UsageError("the capture does not name the GPU (no NVML data); name a base "
                             "topology with --base")
        base = base_for_gpu(model)
    b = _Builder(base, matrix, nvml)
    n = len(matrix.gpus)
    b.set("node.gpus", n, "topo", f"{n} GPU rows (GPU0..GPU{n - 1})")
    _from_nvml(b, model)
    if n == 1:
        _one_gpu(b)
    elif all(matrix.kind(g, h) == "NV" for g in matrix.gpus for h in matrix.gpus if g != h):
        _nvlink(b)
    elif any(matrix.kind(g, h) == "NV" for g in matrix.gpus for h in matrix.gpus if g != h):
        pairs = sorted({f"{g}-{h} {matrix.link(g, h)}" for g in matrix.gpus for h in matrix.gpus
                        if g < h and matrix.kind(g, h) == "NV"})
        raise DiscoveryError(
            f"only some GPU pairs are joined by NVLink ({', '.join(pairs[:6])}); the topology "
            "schema knows an NVSwitch fabric or PCIe alone, not a partial NVLink mesh: write "
            "the file by hand from the closest base", file=matrix.file)
    else:
        _pcie(b)
    _nics(b)
    fabric = b.data["scale_up"]["fabric"]
    b.data["name"] = name or "discovered-" + re.sub(r"[^A-Za-z0-9_.-]+", "-", host).strip("-")
    b.data["description"] = (f"{n} x {b.data['gpu']['model']} discovered on {host}, {date}; "
                             f"{fabric} fabric; other numbers from {base}")
    b.data["sources"] = _sources(b, host, date)
    parse_topology(b.data, f"<discovered from {matrix.file}>")  # it must load
    header = ("Discovered by `pkbsim discover` from nvidia-smi topo -m"
              + (" and NVML" if nvml and nvml.gpus else "") + f" on {host}, {date}.",
              f"Base: {base}. Per-GPU numbers, latencies and mechanisms are kept from it;",
              "`sources:` says which fields were discovered and which were kept. Measure the",
              "kept numbers with `pkbsim validate` and fit them with `pkbsim calibrate`.")
    return Discovered(b.data, base, tuple(b.notes), header)


def _from_nvml(b: _Builder, model: str | None) -> None:
    gpus = b.nvml.gpus if b.nvml else ()
    if b.nvml is not None and not b.nvml.available:
        b.notes.append(f"NVML unavailable ({b.nvml.error}); GPU model, memory and host link "
                       "kept from the base")
    if not gpus:
        return
    if len(gpus) != len(b.m.gpus):
        b.notes.append(f"NVML lists {len(gpus)} GPUs, the matrix {len(b.m.gpus)}; the matrix "
                       "sets node.gpus")
    if model:
        b.set("gpu.model", model.removeprefix("NVIDIA "), "nvml", f"device name {model!r}")
    mem = {g.memory_total_bytes for g in gpus if g.memory_total_bytes}
    if mem:
        b.set("gpu.hbm_capacity_GB", round(min(mem) / 1e9, 1), "nvml",
              f"total device memory {min(mem)} B (GB = 1e9 B)")
    links = {(g.pcie_max_gen, g.pcie_max_width) for g in gpus}
    if len(links) == 1 and (lk := links.pop())[0] in PCIE_LANE_GBps and lk[1]:
        gen, width = lk
        assert gen is not None and width is not None
        rate = PCIE_LANE_GBps[gen] * width
        b.set("pcie.gpu_link_GBps", int(rate) if rate == int(rate) else rate, "nvml",
              f"max PCIe link Gen{gen} x{width} = {rate:g} GB/s per direction"
              f" (nominal {PCIE_LANE_GBps[gen]:g} GB/s per lane)")


def _one_gpu(b: _Builder) -> None:
    b.notes.append("one GPU: no peers to discover, scale_up kept from the base")
    pcie = b.data["pcie"]
    for key in ("gpus_per_switch", "switches_per_socket", "sockets"):
        if key in pcie:
            b.set(f"pcie.{key}", 1, "topo", "one GPU")


def _nvlink(b: _Builder) -> None:
    m, n = b.m, len(b.m.gpus)
    counts = sorted({m.nvlinks(g, h) for g in m.gpus for h in m.gpus if g != h})
    if len(counts) > 1:
        shown = ", ".join(f"NV{c}" for c in counts)
        raise DiscoveryError(f"GPU pairs have different NVLink counts ({shown}): a direct "
                             "NVLink mesh, not an NVSwitch; the topology schema cannot express "
                             "it: write the file by hand from the closest base", file=m.file)
    k = counts[0]
    active = {g.nvlink_active_links for g in (b.nvml.gpus if b.nvml else ())}
    per_gpu = active.pop() if len(active) == 1 else None
    if len(active) > 1:
        b.notes.append(f"NVML's active NVLinks differ between GPUs ({sorted(active, key=str)}): "
                       "a link may be down")
    base_links = b.base.scale_up.links_per_gpu if b.base.scale_up.fabric == "nvswitch" else 0
    if not base_links or not b.base.scale_up.link_bandwidth_GBps:
        raise DiscoveryError(f"the GPUs are joined by NV{k} but base {b.base_name} has no "
                             "NVLink bandwidth; name an NVLink base with --base", file=m.file)
    if n > 2 and k * (n - 1) <= MAX_NVLINKS_PER_GPU and k not in (per_gpu, base_links):
        mesh = per_gpu == k * (n - 1) or base_links == k * (n - 1)
        raise DiscoveryError(
            f"every GPU pair shows NV{k}: "
            + ("each GPU's links go straight to its peers (a direct NVLink mesh, no NVSwitch), "
               "which the topology schema cannot express" if mesh else
               "cannot tell an NVSwitch from a direct mesh without NVML's active link count")
            + "; write the file by hand from the closest base", file=m.file)
    why = (f"NV{k} between every GPU pair" + (f"; NVML: {per_gpu} active NVLinks per GPU"
                                              if per_gpu is not None else ""))
    b.set("scale_up.fabric", "nvswitch", "topo",
          why + ("; two GPUs: either way each reaches the other at links x link rate, which "
                 "the nvswitch model gives" if n == 2
                 else ", more than a direct mesh could give: an NVSwitch"))
    b.set("scale_up.links_per_gpu", k, "topo", why)
    if n == 2 and k != base_links:  # not a slice of the base's NVSwitch: a bridge
        bridge = f"two GPUs joined by NV{k}, not the base's {base_links} links: no NVSwitch"
        for key in ("in_switch_reduction", "multicast"):
            b.set(f"scale_up.{key}", False, "topo", bridge)
        b.drop_mechanism("nvls_multimem", bridge)
    pcie = b.data["pcie"]
    if "gpus_per_switch" in pcie and pcie["gpus_per_switch"] * pcie.get(
            "switches_per_socket", 1) * pcie.get("sockets", 1) != n:
        for key in ("gpus_per_switch", "switches_per_socket", "sockets"):
            pcie.pop(key, None)
        b.notes.append("pcie tree fields of the base removed (they described another GPU count)")


def _pcie(b: _Builder) -> None:
    m = b.m
    b.set("scale_up.fabric", "pcie", "topo", "no NVLink between GPUs (PCIe paths only)")
    for key, value in (("links_per_gpu", 0), ("link_bandwidth_GBps", 0),
                       ("in_switch_reduction", False), ("multicast", False)):
        b.set(f"scale_up.{key}", value, "topo", "no NVLink, no NVSwitch")
    b.drop_mechanism("nvls_multimem", "needs an NVSwitch")
    b.drop_mechanism("nccl_ll128", "NCCL enables LL128 by default only over NVLink")
    if b.base.scale_up.fabric != "pcie":
        b.notes.append(f"base {b.base_name} is an NVLink machine: its mechanism efficiencies "
                       "and signal latency describe NVLink, calibrate them for PCIe")
    tree = _pcie_tree(m)
    if isinstance(tree, str):
        b.notes.append(f"PCIe tree not derived ({tree}); kept from the base")
        pcie = b.data["pcie"]
        size = (pcie.get("gpus_per_switch", len(m.gpus)) * pcie.get("switches_per_socket", 1)
                * pcie.get("sockets", 1))
        if size != len(m.gpus):
            raise DiscoveryError(f"cannot derive the PCIe tree ({tree}) and base "
                                 f"{b.base_name}'s tree holds {size} GPUs, not {len(m.gpus)}",
                                 file=m.file)
        return
    per_switch, per_socket, sockets = tree
    detail = (f"GPUs sharing PIX/PXB form a switch, GPUs not SYS apart a socket: {sockets} "
              f"socket(s) x {per_socket} switch(es) x {per_switch} GPU(s)")
    b.set("pcie.gpus_per_switch", per_switch, "topo", detail)
    b.set("pcie.switches_per_socket", per_socket, "topo", detail)
    b.set("pcie.sockets", sockets, "topo", detail)
    if not b.data["pcie"].get("switch_uplink_GBps") or not b.data["pcie"].get(
            "inter_socket_GBps"):
        b.notes.append("pcie.switch_uplink_GBps / inter_socket_GBps not in the base: 0 means "
                       "no limit; set them for your server")


def _pcie_tree(m: TopoMatrix) -> tuple[int, int, int] | str:
    """(GPUs per switch, switches per socket, sockets) or why the matrix is no regular tree."""
    n = len(m.gpus)
    switch = _groups(m, lambda k: k in NEAR)
    socket = _groups(m, lambda k: k != "SYS")
    for groups, what in ((switch, "switches"), (socket, "sockets")):
        if isinstance(groups, str):
            return f"{what}: {groups}"
        if len({len(g) for g in groups}) != 1:
            return f"{what} hold different GPU counts"
    assert not isinstance(switch, str) and not isinstance(socket, str)
    per_switch, per_socket = len(switch[0]), len(socket[0])
    if per_socket % per_switch:
        return "switches straddle sockets"
    return per_switch, per_socket // per_switch, n // per_socket


def _groups(m: TopoMatrix, joined: Callable[[str], bool]) -> list[list[int]] | str:
    """GPUs in runs of consecutive indices, each run pairwise ``joined``, none joined across."""
    groups: list[list[int]] = []
    for i, g in enumerate(m.gpus):
        if groups and joined(m.kind(m.gpus[groups[-1][0]], g)):
            groups[-1].append(i)
        else:
            groups.append([i])
    for a in groups:
        for b in groups:
            for i in a:
                for j in b:
                    if i != j and joined(m.kind(m.gpus[i], m.gpus[j])) != (a is b):
                        return (f"{m.gpus[i]}-{m.gpus[j]} {m.link(m.gpus[i], m.gpus[j])} breaks "
                                "the grouping of consecutive GPUs")
    return groups


def _nics(b: _Builder) -> None:
    m = b.m
    near = {nic: [g for g in m.gpus if m.link(g, nic) in NEAR] for nic in m.nics}
    share = {g: sum(1 / len(near[nic]) for nic in m.near_nics(g)) for g in m.gpus}
    if not m.nics or not any(near.values()):
        b.notes.append("no NIC within PIX/PXB of a GPU: scale_out kept from the base"
                       if m.nics else "no NICs in the matrix: scale_out kept from the base")
        return
    least = min(share.values())
    listed = "; ".join(f"{g}: " + ", ".join(f"{nic} ({m.nic_devices[nic]}) {m.link(g, nic)}"
                                             for nic in m.near_nics(g))
                       for g in m.gpus if m.near_nics(g))
    if least < 1:
        b.notes.append(f"fewer than one NIC per GPU within PIX/PXB (least {least:g}); "
                       "scale_out.nics_per_gpu kept from the base")
    elif "scale_out" not in b.data:
        b.notes.append(f"{math.floor(least)} NIC(s) per GPU found, but base {b.base_name} has "
                       "no scale_out section (NIC speed unknown); add one by hand")
    else:
        b.set("scale_out.nics_per_gpu", math.floor(least + 1e-9), "topo",
              f"NICs within PIX/PXB of each GPU, shared ones split: {listed}")


def _sources(b: _Builder, host: str, date: str) -> dict[str, str]:
    """One entry per field, or per section where all its fields share one text."""
    tools = {"topo": f"nvidia-smi topo -m on {host}, {date}", "nvml": f"NVML on {host}, {date}"}

    def text(path: str) -> str:
        if path in b.found:
            tool, detail = b.found[path]
            return f"discovered: {tools[tool]}: {detail}"
        key = max((k for k in b.base_sources if path == k or path.startswith(k + ".")),
                  key=len, default=None)
        said = f": {b.base_sources[key]}" if key else " (no source given there)"
        return f"kept from base {b.base_name}{said}"

    def walk(node: Any, path: str) -> dict[str, str]:
        if not isinstance(node, dict):
            return {path: text(path)}
        out: dict[str, str] = {}
        for k, v in node.items():
            out.update(walk(v, f"{path}.{k}" if path else k))
        if path and len(set(out.values())) == 1:
            return {path: next(iter(out.values()))}
        return out

    fields = {k: v for k, v in b.data.items()
              if k not in ("schema_version", "name", "description", "sources")}
    return walk(fields, "")


def render_yaml(d: Discovered) -> str:
    """The topology file: a comment header, the fields, ``sources:`` last."""
    lines = [f"# {line}" for line in d.header]
    if d.notes:
        lines.append("# Notes:")
        lines += [f"#   - {note}" for note in d.notes]
    body = yaml_text(d.data)
    return "\n".join(lines) + "\n" + body


def discover_yaml(topo_text: str, nvml_raw: Any, *, host: str, date: str, file: str,
                  base: str | None = None, name: str | None = None) -> str:
    """Parse a capture and return the topology file's text."""
    matrix = parse_topo_matrix(topo_text, file)
    d = build_topology(matrix, parse_nvml(nvml_raw, file), host=host, date=date, base=base,
                       name=name)
    return render_yaml(d)
