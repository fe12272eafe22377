"""Load and validate topology files into :class:`Topology`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pkbsim.datafiles import data_dir, looks_like_path, nearest
from pkbsim.errors import PkbsimError, TopologyError, did_you_mean
from pkbsim.fields import Fields, load_yaml
from pkbsim.inputs import path_kind
from pkbsim.topology.fabric_kinds import (
    SCALE_OUT_KINDS,
    protocol_step_latency_us,
    protocol_steps,
    step_latency_us,
)
from pkbsim.topology.schema import (
    FABRICS,
    KERNEL_KINDS,
    MECHANISMS,
    PEAK_KEYS,
    Gpu,
    KernelKind,
    Latency,
    Mechanism,
    Pcie,
    ScaleOut,
    ScaleUp,
    Topology,
)

SCHEMA_VERSION = 1
DEFAULT_TOPOLOGY = "dgx-h100"


def list_topologies() -> list[str]:
    return sorted(p.stem for p in data_dir("topologies").glob("*.yaml"))


def shipped_topologies() -> list[tuple[str, Topology | PkbsimError]]:
    """Every shipped topology by name, loaded, or the error that stops it loading."""
    out: list[tuple[str, Topology | PkbsimError]] = []
    for name in list_topologies():
        try:
            out.append((name, load_topology(name)))
        except PkbsimError as exc:
            out.append((name, exc))
    return out


def find_topology(name: str) -> Path:
    """A shipped topology's name, or a path to a user's file."""
    if looks_like_path(name):
        path = Path(name)
        kind = path_kind(path, error=TopologyError)
        if kind != "file":
            raise TopologyError("no such file" if kind == "missing" else "not a regular file",
                                file=name)
        return path
    path = data_dir("topologies") / f"{name}.yaml"
    try:
        shipped = path.is_file()
    except OSError:  # a name no file can have (too long for the file system)
        shipped = False
    if not shipped:
        known = list_topologies()
        close = nearest(name, known)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise TopologyError(f"unknown topology {name!r}{hint} (known: {', '.join(known)})")
    return path


def load_topology(name: str, overrides: Mapping[str, Any] | None = None) -> Topology:
    """Load by name or path. ``overrides`` maps dotted field paths to values (``--set``)."""
    path = find_topology(name)
    data, sha = load_yaml(path, TopologyError)
    if overrides:
        data = apply_overrides(data, overrides, str(path))
    return parse_topology(data, str(path), sha)


# What-if keys that are not fields of the file: the per-GPU NVLink bandwidth (one direction),
# set by scaling the per-link figure (scale_up.link_bandwidth_GBps = value / links_per_gpu).
PER_GPU_BANDWIDTH_KEYS = ("scale_up.bandwidth_GBps", "nvlink.bandwidth_GBps")
# Optional fields a file may leave out; --set may still set them.
OPTIONAL_FIELDS = ("gpu.hbm_efficiency", "latency.eager_launch_us", "latency.kernel_ramp_us",
                   "latency.host_view_us", "latency.host_library_us", "latency.host_call_us",
                   "latency.nccl_launch_us", "scale_out.rail_optimized",
                   "scale_out.oversubscription", "scale_up.step_latency_us",
                   "scale_out.fabric", "scale_out.in_network_reduction",
                   "scale_out.step_latency_us")


def apply_overrides(data: Mapping[str, Any], overrides: Mapping[str, Any], file: str
                    ) -> dict[str, Any]:
    """Copy ``data`` with each dotted path replaced; the path must already exist."""
    out: dict[str, Any] = _deep_copy(data)
    ordered = sorted(overrides.items(), key=lambda kv: kv[0] in PER_GPU_BANDWIDTH_KEYS)
    for dotted, value in ordered:
        if dotted in PER_GPU_BANDWIDTH_KEYS:
            value, dotted = _per_link(out, dotted, value, file), "scale_up.link_bandwidth_GBps"
        node: Any = out
        parts = dotted.split(".")
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            if last and isinstance(node, dict) and dotted in OPTIONAL_FIELDS:
                node[part] = value
                break
            if not isinstance(node, dict) or part not in node:
                known = [*_dotted_fields({k: v for k, v in out.items() if k != "sources"}),
                         *OPTIONAL_FIELDS, *PER_GPU_BANDWIDTH_KEYS]
                raise TopologyError(f"--set {dotted}: no such topology field"
                                    + did_you_mean(dotted, known)
                                    + " (see 'pkbsim topo show' for the fields)",
                                    file=file, field=".".join(parts[: i + 1]))
            if i == len(parts) - 1:
                if isinstance(node[part], dict):
                    raise TopologyError(f"--set {dotted}: is a section, not a value",
                                        file=file, field=dotted)
                node[part] = value
            else:
                node = node[part]
    return _drop_impossible_mechanisms(out, overrides)


def _dotted_fields(data: Mapping[str, Any], prefix: str = "") -> list[str]:
    """Every value's dotted path in a parsed topology file (sections are not values)."""
    out: list[str] = []
    for key, value in data.items():
        path = f"{prefix}{key}"
        out += _dotted_fields(value, path + ".") if isinstance(value, Mapping) else [path]
    return out


def _drop_impossible_mechanisms(data: dict[str, Any], overrides: Mapping[str, Any]
                                ) -> dict[str, Any]:
    """A what-if that turns in-switch reduction off (``--set scale_up.in_switch_reduction=false``)
    also removes the NVLS mechanism, which cannot exist without it; a file that lists both is
    still an error."""
    up, mechs = data.get("scale_up"), data.get("mechanisms")
    if "scale_up.in_switch_reduction" in overrides and isinstance(up, dict) and \
            up.get("in_switch_reduction") is False and isinstance(mechs, dict):
        mechs.pop("nvls_multimem", None)
    return data


def _per_link(data: Mapping[str, Any], key: str, value: Any, file: str) -> Any:
    up = data.get("scale_up")
    links = up.get("links_per_gpu") if isinstance(up, Mapping) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TopologyError(f"--set {key}: expected a number of GB/s, got {value!r}", file=file,
                            field=key)
    if not isinstance(links, int) or links < 1:
        raise TopologyError(f"--set {key}: needs scale_up.links_per_gpu (an NVLink fabric)",
                            file=file, field="scale_up.links_per_gpu")
    return value / links


def _deep_copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value


def parse_topology(data: Mapping[str, Any], file: str, sha256: str = "") -> Topology:
    top = Fields(data, file, "", TopologyError)
    version = top.integer("schema_version")
    if version != SCHEMA_VERSION:
        raise top.fail("schema_version", f"expected {SCHEMA_VERSION}, got {version}")
    name = top.text("name")
    if Path(file).suffix in (".yaml", ".yml") and Path(file).stem != name and \
            Path(file).parent == data_dir("topologies"):
        raise top.fail("name", f"must equal the file name {Path(file).stem!r}")
    description = top.text("description", "")
    gpu = _gpu(top.sub("gpu"))
    node = top.sub("node")
    gpus_per_node = node.integer("gpus", lo=1)
    nodes = node.integer("count", 1, lo=1)
    node.done()
    scale_up = _scale_up(top.sub("scale_up"))
    pcie = _pcie(top.sub("pcie"), gpus_per_node)
    scale_out = _scale_out(top.sub("scale_out")) if top.has("scale_out") else None
    top.raw("scale_out", None)
    if nodes > 1 and scale_out is None:
        raise top.fail("scale_out", f"is required when node.count is {nodes} (> 1)")
    latency = _latency(top.sub("latency"))
    mechanisms = _mechanisms(top.sub("mechanisms"), scale_up)
    kernels = _kernels(top.sub("kernels")) if top.has("kernels") else {}
    top.raw("kernels", None)
    sources = {str(k): str(v) for k, v in top.items("sources")}
    top.done()
    return Topology(
        name=name, description=description, gpu=gpu, gpus_per_node=gpus_per_node,
        nodes=nodes, scale_up=scale_up, pcie=pcie, scale_out=scale_out, latency=latency,
        mechanisms=mechanisms, sources=sources, file=file, sha256=sha256, kernels=kernels,
    )


def _gpu(f: Fields) -> Gpu:
    peak = f.sub("peak_tflops")
    peaks = {key: peak.num(key, lo=0, lo_open=True) for key in PEAK_KEYS if peak.has(key)}
    for key in PEAK_KEYS:
        peak.raw(key, None)
    peak.done()
    for needed in ("bf16_tensor", "fp32"):
        if needed not in peaks:
            raise peak.fail(needed, "is required (the dense peak in TFLOP/s)")
    gpu = Gpu(
        model=f.text("model"),
        sm_count=f.integer("sm_count", lo=1),
        hbm_bandwidth_GBps=f.num("hbm_bandwidth_GBps", lo=0, lo_open=True),
        hbm_capacity_GB=f.num("hbm_capacity_GB", lo=0, lo_open=True),
        l2_MiB=f.num("l2_MiB", lo=0),
        copy_engines=f.integer("copy_engines", lo=0),
        peak_tflops=peaks,
        hbm_efficiency=f.num("hbm_efficiency", 1.0, lo=0, lo_open=True, hi=1.0),
    )
    f.done()
    return gpu


def _scale_up(f: Fields) -> ScaleUp:
    fabric = f.text("fabric", choices=FABRICS)
    links = f.integer("links_per_gpu", 0, lo=0)
    bw = f.num("link_bandwidth_GBps", 0, lo=0)
    reduction = f.flag("in_switch_reduction", False)
    multicast = f.flag("multicast", False)
    signal = f.num("signal_latency_us", lo=0, lo_open=True)
    step = (protocol_steps(f.sub("step_latency_us")) if f.has("step_latency_us")
            else protocol_step_latency_us(fabric))
    f.raw("step_latency_us", None)
    f.done()  # a mistyped field first: it explains a missing one
    if fabric == "nvswitch" and (links == 0 or bw == 0):
        raise f.fail("links_per_gpu", "an nvswitch fabric needs links_per_gpu and "
                     "link_bandwidth_GBps above 0")
    if fabric == "pcie" and (reduction or multicast):
        raise f.fail("in_switch_reduction", "a pcie fabric has no in-switch reduction "
                     "or multicast")
    return ScaleUp(fabric, links, bw, reduction, multicast, signal, step)


def _pcie(f: Fields, gpus_per_node: int) -> Pcie:
    pcie = Pcie(
        gpu_link_GBps=f.num("gpu_link_GBps", lo=0, lo_open=True),
        gpu_link_efficiency=f.num("gpu_link_efficiency", lo=0, hi=1, lo_open=True),
        latency_us=f.num("latency_us", lo=0),
        p2p=f.flag("p2p", True),
        gpus_per_switch=f.integer("gpus_per_switch", gpus_per_node, lo=1),
        switches_per_socket=f.integer("switches_per_socket", 1, lo=1),
        sockets=f.integer("sockets", 1, lo=1),
        switch_uplink_GBps=f.num("switch_uplink_GBps", 0, lo=0),
        inter_socket_GBps=f.num("inter_socket_GBps", 0, lo=0),
    )
    total = pcie.gpus_per_switch * pcie.switches_per_socket * pcie.sockets
    if total != gpus_per_node:
        raise f.fail("gpus_per_switch", f"gpus_per_switch x switches_per_socket x sockets = "
                     f"{total}, but node.gpus is {gpus_per_node}")
    f.done()
    return pcie


def _scale_out(f: Fields) -> ScaleOut:
    out = ScaleOut(
        nics_per_gpu=f.integer("nics_per_gpu", lo=1),
        nic_bandwidth_GBps=f.num("nic_bandwidth_GBps", lo=0, lo_open=True),
        efficiency=f.num("efficiency", lo=0, hi=1, lo_open=True),
        latency_us=f.num("latency_us", lo=0),
        rail_optimized=f.flag("rail_optimized", True),
        oversubscription=f.num("oversubscription", 1.0, lo=1),
        fabric=(kind := f.text("fabric", "infiniband", choices=SCALE_OUT_KINDS)),
        in_network_reduction=f.flag("in_network_reduction", False),
        step_latency_us=f.num("step_latency_us", step_latency_us(kind), lo=0),
    )
    f.done()
    return out


def _latency(f: Fields) -> Latency:
    out = Latency(
        kernel_launch_us=f.num("kernel_launch_us", lo=0),
        host_launch_us=f.num("host_launch_us", lo=0),
        nccl_call_us=f.num("nccl_call_us", lo=0),
        host_collective_us=f.num("host_collective_us", lo=0),
        host_sync_us=f.num("host_sync_us", lo=0),
        eager_launch_us=f.num("eager_launch_us", lo=0) if f.has("eager_launch_us") else None,
        kernel_ramp_us=f.num("kernel_ramp_us", 0.0, lo=0),
        host_view_us=f.num("host_view_us", 0.0, lo=0),
        host_call_us=f.num("host_call_us", 0.0, lo=0),
        nccl_launch_us=f.num("nccl_launch_us", 0.0, lo=0),
        host_library_us=f.num("host_library_us", lo=0) if f.has("host_library_us") else None,
    )
    f.done()
    return out


def _kernels(f: Fields) -> dict[str, KernelKind]:
    """Calibrated kernel kinds; a kind left out keeps the built-in estimate
    (pkbsim.trace.cost.KINDS)."""
    out: dict[str, KernelKind] = {}
    for name in f.data:
        if name not in KERNEL_KINDS:
            raise f.fail(str(name), f"unknown kernel kind; expected one of: "
                                    f"{', '.join(KERNEL_KINDS)}")
        k = f.sub(str(name))
        out[str(name)] = KernelKind(
            memory_efficiency=k.num("memory_efficiency", lo=0, hi=2, lo_open=True),
            compute_efficiency=k.num("compute_efficiency", 1.0, lo=0, hi=1, lo_open=True),
            fixed_us=k.num("fixed_us", 0.0, lo=0, hi=1e4),
        )
        k.done()
    return out


def _mechanisms(f: Fields, scale_up: ScaleUp) -> dict[str, Mechanism]:
    out: dict[str, Mechanism] = {}
    for name in f.data:
        if name not in MECHANISMS:
            raise f.fail(str(name), f"unknown mechanism; expected one of: {', '.join(MECHANISMS)}")
        m = f.sub(str(name))
        out[name] = Mechanism(
            name=name,
            efficiency=m.num("efficiency", lo=0, hi=1, lo_open=True),
            latency_us=m.num("latency_us", lo=0),
            step_latency_us=m.num("step_latency_us", 0.0, lo=0),
            sms_to_saturate=m.integer("sms_to_saturate", lo=0),
            min_efficient_message_bytes=m.integer("min_efficient_message_bytes", lo=1),
        )
        m.done()
    if not out:
        raise TopologyError("at least one mechanism is required", file=f.file, field=f.path)
    if "nvls_multimem" in out and not scale_up.in_switch_reduction:
        raise f.fail("nvls_multimem", "needs scale_up.in_switch_reduction: true")
    if scale_up.fabric == "pcie" and "nvls_multimem" in out:
        raise f.fail("nvls_multimem", "is not possible on a pcie fabric")
    return out
