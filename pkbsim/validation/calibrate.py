"""Fit a topology's parameters to a validation run (pure: reads files, returns a Calibration).

Each rule below maps measurements of one op (pkbsim.validation.results.OPS) to topology fields;
docs/validation.md ("Calibration") lists every field with its op and formula. Fields without
data keep the base topology's value and say so in ``sources:``; a rule with too little data
skips its fields and says why (``Calibration.skipped``). Only cases that ran (ok, or failed
part-way) count.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from pkbsim.datafiles import display_path
from pkbsim.errors import PkbsimError, TopologyError
from pkbsim.fields import load_yaml, yaml_text
from pkbsim.topology.loader import parse_topology
from pkbsim.topology.schema import Topology
from pkbsim.trace.cost import kind_of as cost_kind
from pkbsim.validation import programs
from pkbsim.validation.fit import (
    AlphaBetaFit,
    FitError,
    SaturationFit,
    Summary,
    fit_alpha_beta,
    fit_saturation,
    robust_summary,
)
from pkbsim.validation.results import Measurement, Results

RAN = ("ok", "failed", "timeout")  # a line is written once its op is timed and checked
Detail = AlphaBetaFit | SaturationFit | Summary
# where a field missing from the base file goes: after this key of its section
_INSERT_AFTER = {"gpu.hbm_efficiency": "hbm_bandwidth_GBps"}
_HEADER_KEYS = ("schema_version", "name", "description")


@dataclass(frozen=True)
class Fitted:
    value: float  # as written to the file (rounded to 4 significant digits)
    err: float  # 1-sigma; NaN where the data give no error estimate
    unit: str  # "us", "SMs", or "" for a fraction
    op: str
    points: int
    rel_rms: float  # of the underlying fit
    note: str = ""  # formula, bounds, clamping


@dataclass(frozen=True)
class Calibration:
    topology: Topology  # as loaded from to_yaml(topology.name)
    fields: dict[str, Fitted]  # dotted path -> fitted value
    kept: list[str]  # dotted paths of every field kept from the base
    skipped: dict[str, str]  # dotted path -> why its data were not enough
    notes: list[str]  # about the run as a whole (measurements ignored, and why)
    details: dict[str, Detail]  # every fit made, by a short label (op and its selection)
    base: Topology
    results_file: str
    results_sha256: str
    data: dict[str, Any]  # the file's mapping, less schema_version, name, description, sources
    sources: dict[str, str]
    description: str
    header: str  # comment lines at the top of the file

    def to_yaml(self, name: str) -> str:
        """The complete topology file, named ``name``."""
        return _render(self.header, name, self.description, self.data, self.sources)


def calibrate(results: Results, base: Topology, *, name: str | None = None,
              results_sha256: str | None = None) -> Calibration:
    """Fit ``base``'s parameters to ``results``; ``name`` defaults to BASE-calibrated.

    ``results_sha256`` defaults to the hash of ``results.file`` where it can be read.
    """
    sha = results_sha256 if results_sha256 is not None else _file_sha256(results.file)
    rules = _Rules(results, base)
    for rule in RULES:
        rule(rules)
    raw, _ = load_yaml(Path(base.file), TopologyError)
    data = {k: copy.deepcopy(v) for k, v in raw.items() if k not in (*_HEADER_KEYS, "sources")}
    for path, fitted in rules.fields.items():
        _set_path(data, path, int(fitted.value) if fitted.unit == "SMs" else fitted.value)
    leaves = list(_leaves("", data))
    kept = [leaf for leaf in leaves if leaf not in rules.fields]
    origin = _origin(results, sha)
    sources = _sources(leaves, rules.fields, base, f"{Path(results.file).name} ({origin})")
    env = results.environment
    description = (f"{base.description}; calibrated from {results.file} "
                   f"({env.get('gpu_name', '?')}, {env.get('date', '?')})")
    header = (f"# Calibrated by `pkbsim calibrate` from {results.file}\n"
              f"# ({origin}) over base topology {base.name} ({display_path(base.file)}).\n"
              f"# {len(rules.fields)} field(s) fitted, {len(kept)} kept from the base; "
              f"`sources:` says which, with each fit's error and quality.\n"
              f"# Units are in the field names. GB/s = 1e9 B/s, per GPU, one direction.\n")
    text = _render(header, name or f"{base.name}-calibrated", description, data, sources)
    topology = parse_topology(yaml.safe_load(text), f"<calibrated from {results.file}>",
                              hashlib.sha256(text.encode()).hexdigest())
    return Calibration(topology, rules.fields, kept, rules.skipped, rules.notes, rules.details,
                       base, results.file, sha, data, sources, description, header)


def field_value(topo: Topology, path: str) -> float:
    """A numeric field of ``topo`` by dotted path (``mechanisms.tma.efficiency``)."""
    parts = path.split(".")
    if parts[0] == "kernels" and len(parts) == 3:  # uncalibrated kinds: the built-in values
        return float(getattr(cost_kind(parts[1], topo), parts[2]))
    node: Any = topo
    for part in parts:
        node = node[part] if isinstance(node, dict) else getattr(node, part)
    if node is None and path == "latency.eager_launch_us":
        return topo.latency.eager_kernel_us  # unset: eager kernels cost kernel_launch_us
    return float(node)


def _render(header: str, name: str, description: str, data: dict[str, Any],
            sources: dict[str, str]) -> str:
    head = {"schema_version": 1, "name": name, "description": description}
    body = yaml_text({**head, **data}, width=10**6)
    tail = yaml_text({"sources": sources}, width=10**6)
    return f"{header}{body}\n{tail}"


class _Rules:
    """The measurements by op, and what the rules fitted or skipped."""

    def __init__(self, results: Results, base: Topology) -> None:
        self.base = base
        self.by_op: dict[str, list[Measurement]] = {}
        self.notes: list[str] = []
        local = 0
        for case in results.cases:
            if case.status not in RAN:
                continue
            for m in case.measurements:
                if m.op.startswith("peer_") and (case.data.get("self_test") is True or (
                        "src" in m.params and m.params.get("src") == m.params.get("dst"))):
                    local += 1  # validate/peer.py --self: both ends on one GPU
                    continue
                self.by_op.setdefault(m.op, []).append(m)
        if local:
            self.notes.append(f"{local} peer measurement(s) with both ends on one GPU (a self "
                              f"test, not a peer) ignored")
        self.fields: dict[str, Fitted] = {}
        self.hbm_fit: tuple[str, AlphaBetaFit] | None = None  # the SM copy's size sweep
        self.skipped: dict[str, str] = {}
        self.details: dict[str, Detail] = {}

    def ms(self, op: str, **match: Any) -> list[Measurement]:
        """Measurements of ``op`` whose params equal ``match`` (text compared ignoring case)."""
        return [m for m in self.by_op.get(op, []) if all(_same(m.params.get(k), v)
                                                          for k, v in match.items())]

    def put(self, path: str, value: float, err: float, unit: str, op: str, points: int,
            rel_rms: float, note: str = "") -> None:
        self.fields[path] = Fitted(_round(value), err, unit, op, points, rel_rms, note)

    def skip(self, paths: list[str], why: str) -> None:
        for path in paths:
            self.skipped[path] = why

    def alpha_beta(self, label: str, ms: list[Measurement], paths: list[str],
                   scale: float = 1.0) -> AlphaBetaFit | None:
        """Fit time against size x ``scale``; on too little data skip ``paths``."""
        try:
            fit = fit_alpha_beta([m.size_bytes * scale for m in ms], [m.time_s for m in ms])
        except FitError as exc:
            self.skip(paths, f"{label}: {exc}")
            return None
        self.details[label] = fit
        return fit

    def eager_launch_us(self) -> float:
        """The GPU cost of an eager kernel: fitted, else the base's (kernel_launch_us if unset)."""
        if "latency.eager_launch_us" in self.fields:
            return self.fields["latency.eager_launch_us"].value
        return self.base.latency.eager_kernel_us

    def value(self, path: str) -> float:
        """The fitted value of ``path`` if fitted so far, else the base's."""
        return self.fields[path].value if path in self.fields else field_value(self.base, path)

    def latency(self, path: str, fit: AlphaBetaFit, op: str, label: str, *, steps: int = 0,
                mech: str = "", launch: bool = False) -> None:
        """alpha of ``fit`` less what the model adds on its own: an eager kernel launch
        (latency.eager_launch_us) and ``steps`` x the mechanism's step_latency_us."""
        parts = [f"alpha {fit.alpha_us:.4g} us of t = alpha + size / B ({label})"]
        value = fit.alpha_us
        if launch:
            eager = self.eager_launch_us()
            value -= eager
            parts.append(f"less latency.eager_launch_us {eager:g}")
        step_us = self.base.mechanisms[mech].step_latency_us if mech else 0.0
        if steps and step_us:
            value -= steps * step_us
            parts.append(f"less {steps} x the base's step_latency_us {step_us:g}")
        note = ", ".join(parts)
        if value < 0:
            note += f"; {value:.3g} us floored at 0"
        self.put(path, max(value, 0.0), fit.alpha_err_s * 1e6, "us", op, fit.points,
                 fit.rel_rms, note)

    def efficiency(self, path: str, ratio: float, err: float, op: str, points: int,
                   rel_rms: float, note: str, peak: str) -> None:
        if ratio > 1:
            note += f"; {ratio:.4g} clamped to 1 (the base's {peak} is below what was measured)"
        self.put(path, min(ratio, 1.0), err, "", op, points, rel_rms, note)

    def summary(self, path: str, op: str, ms: list[Measurement],
                value: Callable[[Measurement], float], *, scale: float = 1.0, note: str = "",
                label: str = "") -> None:
        """The median of ``value`` over ``ms`` (see ``_summary``), times ``scale``; its rel
        rms is that of (median - value) / value."""
        if not ms:
            return
        s, how = _summary(ms, value)
        self.details[label or op] = s
        rel = [(s.median - value(m)) / value(m) for m in ms]
        self.put(path, s.median * scale, s.err * scale, "us", op, s.points,
                 math.sqrt(sum(x * x for x in rel) / len(rel)),
                 "; ".join(p for p in (note, how) if p))


def _summary(ms: list[Measurement], value: Callable[[Measurement], float]
             ) -> tuple[Summary, str]:
    """robust_summary of the values; one measurement takes its error from its repeats."""
    s = robust_summary([value(m) for m in ms])
    m = ms[0]
    if s.points == 1 and m.min_us is not None and m.max_us is not None and m.repeats > 1:
        err = 0.5 * (m.max_us - m.min_us) / math.sqrt(m.repeats) * value(m) / m.time_us
        return Summary(s.median, err, 1, 0.0), (f"one measurement: error = half its min-max "
                                                f"range / sqrt({m.repeats} repeats)")
    if s.points == 1:
        return Summary(s.median, math.nan, 1, 0.0), "one measurement: no error estimate"
    return s, f"median of {s.points}, error from the scaled MAD"


def _hbm(r: _Rules) -> None:
    path, gpu = "gpu.hbm_efficiency", r.base.gpu
    ce = r.ms("d2d_copy_engine")
    if ce:
        r.alpha_beta("d2d_copy_engine", ce, [])
    ms = r.ms("d2d_sm_copy")
    _saturation_detail(r, "d2d_sm_copy", ms)
    sized = [m for m in ms if m.params.get("sweep") == "size"]  # grid sized to the data
    sweep = (float(max(_blocks(m) for m in sized)), sized) if len(sized) >= 2 else \
        _size_sweep([m for m in ms if _blocks(m) >= gpu.sm_count])
    if sweep is None:
        if ms:
            r.skip([path], f"no d2d_sm_copy size sweep on {gpu.sm_count} blocks (sm_count) "
                           f"or more")
        return
    blocks, at = sweep
    label = f"d2d_sm_copy blocks={blocks:g}"
    fit = r.alpha_beta(label, at, [path, "latency.kernel_ramp_us"])
    if fit:
        r.hbm_fit = (label, fit)
        peak = gpu.hbm_bandwidth_GBps * 1e9
        r.efficiency(path, 2 * fit.bandwidth_Bps / peak, 2 * fit.bandwidth_err_Bps / peak,
                     "d2d_sm_copy", fit.points, fit.rel_rms,
                     f"efficiency = 2 x B / hbm_bandwidth_GBps {gpu.hbm_bandwidth_GBps:g}, "
                     f"B = {fit.bandwidth_GBps:.4g} GB/s at {blocks:g} blocks",
                     "gpu.hbm_bandwidth_GBps")


def _latencies(r: _Rules) -> None:
    r.summary("latency.kernel_launch_us", "launch_graph_node",
              r.ms("launch_graph_node"), _time_us)
    r.summary("latency.eager_launch_us", "launch_eager_queued",
              r.ms("launch_eager_queued"), _time_us)
    r.summary("latency.host_launch_us", "host_torch_op", r.ms("host_torch_op"), _host_us,
              note="host time (params.host_us where given)")
    calls, world = _largest_world(r.ms("host_dist_call"))
    r.summary("latency.host_collective_us", "host_dist_call", calls, _host_us,
              note=f"every collective measured, world_size {world}, host time "
                   f"(params.host_us where given)",
              label=f"host_dist_call world_size={world}")
    r.summary("latency.host_sync_us", "host_item_sync", r.ms("host_item_sync"), _time_us)
    r.summary("scale_up.signal_latency_us", "peer_flag_roundtrip", r.ms("peer_flag_roundtrip"),
              _time_us, scale=0.5, note="half the round trip (one-way flag delivery)")


def _kernel_ramp(r: _Rules) -> None:
    """What a kernel that moves data costs beyond an empty one: the SM copy's alpha less the
    eager launch (latency.eager_launch_us, fitted just before)."""
    if r.hbm_fit is not None:
        label, fit = r.hbm_fit
        r.latency("latency.kernel_ramp_us", fit, "d2d_sm_copy", label, launch=True)


def _copy_engine(r: _Rules) -> None:
    if "copy_engine" not in r.base.mechanisms:
        return
    lat, eff = "mechanisms.copy_engine.latency_us", "mechanisms.copy_engine.efficiency"
    peer = r.ms("peer_copy_engine", direction="uni")
    op, ms = ("peer_copy_engine", peer) if peer else ("d2d_copy_engine", r.ms("d2d_copy_engine"))
    if not ms:
        return
    label = "peer_copy_engine uni" if peer else "d2d_copy_engine"
    fit = r.alpha_beta(label, ms, [lat, eff] if peer else [lat])
    if not fit:
        return
    r.latency(lat, fit, op, label, steps=1 if peer else 0, mech="copy_engine", launch=False)
    if peer:
        line = r.base.peer_line_rate_GBps * 1e9
        r.efficiency(eff, fit.bandwidth_Bps / line, fit.bandwidth_err_Bps / line, op,
                     fit.points, fit.rel_rms, f"efficiency = B / peer line rate "
                     f"{line / 1e9:g} GB/s, B = {fit.bandwidth_GBps:.4g} GB/s",
                     "peer line rate")


def _pcie(r: _Rules) -> None:
    lat, eff = "pcie.latency_us", "pcie.gpu_link_efficiency"
    h2d, d2h = r.ms("h2d_pinned"), r.ms("d2h_pinned")
    for op, ms in (("h2d_pinned", h2d), ("d2h_pinned", d2h)):
        if ms:
            r.alpha_beta(op, ms, [])
    if not h2d and not d2h:
        return
    op = "+".join(o for o, ms in (("h2d_pinned", h2d), ("d2h_pinned", d2h)) if ms)
    fit = r.alpha_beta(op, h2d + d2h, [lat, eff])
    if not fit:
        return
    r.latency(lat, fit, op, "both directions in one fit")
    link = r.base.pcie.gpu_link_GBps * 1e9
    r.efficiency(eff, fit.bandwidth_Bps / link, fit.bandwidth_err_Bps / link, op, fit.points,
                 fit.rel_rms, f"efficiency = B / gpu_link_GBps {link / 1e9:g}, "
                 f"B = {fit.bandwidth_GBps:.4g} GB/s", "pcie.gpu_link_GBps")


def _sm_mechanisms(r: _Rules) -> None:
    for mech, op, match in (("sm_ldst", "peer_sm_ldst", {"mode": "push"}),
                            ("tma", "peer_tma", {})):
        ms = r.ms(op, **match)
        prefix = f"mechanisms.{mech}"
        paths = [f"{prefix}.efficiency", f"{prefix}.sms_to_saturate", f"{prefix}.latency_us"]
        if not ms:
            continue
        if mech not in r.base.mechanisms:
            r.skip(paths, f"the base topology has no {mech} mechanism")
            continue
        _saturation(r, op, ms, paths[:2])
        sweep = _size_sweep(ms)
        if sweep is None:
            r.skip(paths[2:], f"{op}: no block count measured at two sizes or more")
            continue
        blocks, at = sweep
        label = f"{op} blocks={blocks:g}"
        fit = r.alpha_beta(label, at, paths[2:])
        if fit:
            r.latency(paths[2], fit, op, label, steps=1, mech=mech, launch=True)


def _saturation(r: _Rules, op: str, ms: list[Measurement], paths: list[str]) -> None:
    made = _saturation_detail(r, op, ms)
    if made is None:
        r.skip(paths, f"{op}: no size measured at two block counts or more")
        return
    fit, size = made
    if fit.note.startswith("no plateau"):
        r.skip(paths, f"{op}: {fit.note}")
        return
    line = r.base.peer_line_rate_GBps * 1e9
    where = f"saturation fit over blocks at {size} B"
    r.efficiency(paths[0], fit.plateau_Bps / line, fit.plateau_err_Bps / line, op, fit.points,
                 fit.rel_rms, f"efficiency = plateau / peer line rate {line / 1e9:g} GB/s, "
                 f"plateau {fit.plateau_Bps / 1e9:.4g} GB/s, {where}", "peer line rate")
    note = f"blocks that reach the plateau (one block per SM), {where}"
    r.put(paths[1], max(round(fit.saturate_at), 1), fit.saturate_at_err, "SMs", op,
          fit.points, fit.rel_rms, f"{note}; {fit.note}" if fit.note else note)


def _saturation_detail(r: _Rules, op: str, ms: list[Measurement]
                       ) -> tuple[SaturationFit, int] | None:
    """Saturation over blocks at the size measured on the most block counts (the largest such
    size on a tie); None with fewer than two block counts."""
    by_size: dict[int, list[Measurement]] = {}
    for m in ms:
        if _blocks(m) > 0:
            by_size.setdefault(m.size_bytes, []).append(m)
    if not by_size:
        return None
    size = max(by_size, key=lambda n: (len({_blocks(m) for m in by_size[n]}), n))
    try:
        fit = fit_saturation([_blocks(m) for m in by_size[size]],
                             [m.size_bytes / m.time_s for m in by_size[size]])
    except FitError:
        return None
    r.details[f"{op} saturation at {size} B"] = fit
    return fit, size


def _size_sweep(ms: list[Measurement]) -> tuple[float, list[Measurement]] | None:
    """The largest block count measured at two sizes or more, with its measurements."""
    by_blocks: dict[float, list[Measurement]] = {}
    for m in ms:
        by_blocks.setdefault(_blocks(m), []).append(m)
    swept = [b for b, at in by_blocks.items() if len({m.size_bytes for m in at}) >= 2]
    return (max(swept), by_blocks[max(swept)]) if swept else None


def _nccl(r: _Rules) -> None:
    line = r.base.peer_line_rate_GBps * 1e9
    for proto, mech in (("Simple", "nccl_simple"), ("LL128", "nccl_ll128"), ("LL", "nccl_ll")):
        paths = [f"mechanisms.{mech}.efficiency", f"mechanisms.{mech}.latency_us"]
        ms, world = _largest_world(r.ms("nccl_collective", collective="all_reduce",
                                        nccl_proto=proto, nccl_algo="Ring"))
        if not ms:
            continue
        if mech not in r.base.mechanisms or world < 2:
            r.skip(paths, f"the base has no {mech}" if world >= 2 else
                   "only world_size 1 measured: nothing crosses a link")
            continue
        label = f"nccl_collective all_reduce Ring {proto} world_size={world}"
        fit = r.alpha_beta(label, ms, paths, scale=2 * (world - 1) / world)
        if not fit:
            continue
        r.efficiency(paths[0], fit.bandwidth_Bps / line, fit.bandwidth_err_Bps / line,
                     "nccl_collective", fit.points, fit.rel_rms,
                     f"efficiency = busbw plateau / peer line rate {line / 1e9:g} GB/s, "
                     f"busbw {fit.bandwidth_GBps:.4g} GB/s ({label}, bus bytes = size x "
                     f"2(W-1)/W)", "peer line rate")
        r.latency(paths[1], fit, "nccl_collective", label, steps=2 * (world - 1), mech=mech,
                  launch=True)


def _nvls(r: _Rules) -> None:
    path = "mechanisms.nvls_multimem.efficiency"
    ms, world = _largest_world(r.ms("nccl_collective", collective="all_reduce",
                                    nccl_algo="NVLS"))
    if not ms:
        return
    if "nvls_multimem" not in r.base.mechanisms or world < 2:
        r.skip([path], "the base has no nvls_multimem" if world >= 2 else
               "only world_size 1 measured: nothing crosses a link")
        return
    label = f"nccl_collective all_reduce NVLS world_size={world}"
    fit = r.alpha_beta(label, ms, [path])
    if fit:
        line, factor = r.base.peer_line_rate_GBps * 1e9, (world + 1) / world
        r.efficiency(path, factor * fit.bandwidth_Bps / line,
                     factor * fit.bandwidth_err_Bps / line, "nccl_collective", fit.points,
                     fit.rel_rms, f"efficiency = (W+1)/W x algbw / peer line rate "
                     f"{line / 1e9:g} GB/s, algbw {fit.bandwidth_GBps:.4g} GB/s ({label})",
                     "peer line rate")


def _host_from_programs(r: _Rules) -> None:
    """Host costs per operator class learnt from PKB's references (pkbsim.validation.programs);
    they replace the single-operator microbenchmarks' where both ran."""
    rows = programs.program_rows(r.by_op.get("pkb_reference", []))
    if not rows:
        return
    keep = {c: _latency_value(r, path) for c, path in programs.HOST_FIELDS.items()}
    try:
        fit = programs.fit_host_costs(rows, keep)
    except PkbsimError as exc:
        r.skip(list(programs.HOST_FIELDS.values()), f"pkb_reference: {exc.message}")
        return
    half = sum(1 for row in rows if row.fit_half)
    for c, path in programs.HOST_FIELDS.items():
        if c in fit.skipped:
            r.skip([path], f"pkb_reference: {fit.skipped[c]}")
            continue
        r.put(path, fit.costs_us[c], math.nan, "us", "pkb_reference", fit.rows, fit.rel_rms,
              f"least squares of log(predicted / measured), costs >= 0, over the {fit.rows} "
              f"host-bound rows (host issue >= "
              f"{programs.HOST_BOUND:g} x time per call) of the fit half (odd problem ids, "
              f"{half} rows), time per call = host_call_us + operators per class x cost "
              f"(traced programs, tasks/traces); docs/validation.md")


def _kernel_kinds(r: _Rules) -> None:
    """Each kernel kind's efficiency and fixed cost (pkbsim.validation.programs), against the
    HBM rate and graph-node launch fitted before."""
    points = programs.kernel_points(r.by_op.get("kernel_kind", []))
    if not points:
        return
    gpu = dataclasses.replace(r.base.gpu, hbm_efficiency=r.value("gpu.hbm_efficiency"))
    lat = dataclasses.replace(r.base.latency,
                              kernel_launch_us=r.value("latency.kernel_launch_us"))
    topo = dataclasses.replace(r.base, gpu=gpu, latency=lat)
    for kind in sorted(points):
        prefix = f"kernels.{kind}"
        fit = programs.fit_kernel_kind(kind, points[kind], topo)
        if fit is None:
            r.skip([prefix], f"kernel_kind {kind}: fewer than {programs.MIN_POINTS_PER_KIND} "
                             f"fit points, or no rate")
            continue
        built_in = cost_kind(kind, r.base)
        which = "compute" if fit.compute_efficiency is not None else "memory"
        eff = fit.compute_efficiency if which == "compute" else fit.memory_efficiency
        assert eff is not None
        work = "FLOPs / (peak" if which == "compute" else "bytes / (B_hbm"
        note = (f"t per kernel = a + {work} x e), graph replay, the fit half (even positions "
                f"of each size sweep); a = {fit.intercept_us:.3g} us")
        memory = fit.memory_efficiency or built_in.memory_efficiency
        if which == "memory" and memory > 1.0:  # the roofline's rate bounds every kernel
            note += (f"; {memory:.4g} capped at 1: the achievable HBM rate the roofline uses "
                     f"(sizes that fit the L2 stream faster)")
            memory = 1.0
        r.put(f"{prefix}.memory_efficiency", memory, math.nan, "", "kernel_kind", fit.points,
              fit.rel_rms,
              note if which == "memory" else "kept: the built-in estimate (a compute kind)")
        r.put(f"{prefix}.compute_efficiency",
              fit.compute_efficiency or built_in.compute_efficiency, math.nan, "",
              "kernel_kind", fit.points, fit.rel_rms,
              note if which == "compute" else "kept: the built-in estimate (a memory kind)")
        r.put(f"{prefix}.fixed_us", fit.fixed_us, math.nan, "us", "kernel_kind", fit.points,
              fit.rel_rms, f"a {fit.intercept_us:.3g} us less latency.kernel_launch_us "
                           f"{topo.latency.kernel_launch_us:g} (a graph node's launch), at "
                           f"least 0")


def _latency_value(r: _Rules, path: str) -> float:
    if path == "latency.host_library_us" and path not in r.fields:
        return r.base.latency.library_us
    return r.value(path)


# order matters: latencies fitted first are deducted by the rules after them
RULES: tuple[Callable[[_Rules], None], ...] = (
    _hbm, _latencies, _kernel_ramp, _copy_engine, _pcie, _sm_mechanisms, _nccl, _nvls,
    _host_from_programs, _kernel_kinds)


def _blocks(m: Measurement) -> float:
    return _number(m.params.get("blocks"))


def _largest_world(ms: list[Measurement]) -> tuple[list[Measurement], int]:
    if not ms:
        return [], 0
    world = int(max(_number(m.params.get("world_size")) for m in ms))
    return [m for m in ms if _number(m.params.get("world_size")) == world], world


def _time_us(m: Measurement) -> float:
    return m.time_us


def _host_us(m: Measurement) -> float:
    host = _number(m.params.get("host_us"))
    return host if host > 0 else m.time_us


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and \
        math.isfinite(value)


def _number(value: Any) -> float:
    """A numeric param, or 0 where it is missing or not a number."""
    return float(value) if _is_number(value) else 0.0


def _same(value: Any, want: Any) -> bool:
    if isinstance(value, str) and isinstance(want, str):
        return value.lower() == want.lower()
    return bool(value == want)


def _round(value: float) -> float:
    return float(f"{value:.4g}")


def _file_sha256(file: str) -> str:
    try:
        return hashlib.sha256(Path(file).read_bytes()).hexdigest() if file else ""
    except OSError:
        return ""


def _set_path(data: dict[str, Any], dotted: str, value: float | int) -> None:
    *parents, key = dotted.split(".")
    node = data
    for part in parents:
        node = node.setdefault(part, {})  # a section the base lacks (kernels.<kind>)
    if key in node or dotted not in _INSERT_AFTER:
        node[key] = value
        return
    items = list(node.items())
    at = next((i + 1 for i, (k, _) in enumerate(items) if k == _INSERT_AFTER[dotted]),
              len(items))
    node.clear()
    node.update([*items[:at], (key, value), *items[at:]])


def _leaves(prefix: str, value: Any) -> Iterator[str]:
    if isinstance(value, dict) and value:
        for k, v in value.items():
            yield from _leaves(f"{prefix}.{k}" if prefix else str(k), v)
    else:
        yield prefix


def _origin(results: Results, sha: str) -> str:
    env = results.environment
    parts = [f"{env.get('gpu_name', 'unknown GPU')} x {env.get('gpu_count', '?')}",
             f"host {env.get('hostname', '?')}", str(env.get("date", "undated"))]
    if sha:
        parts.append(f"sha256 {sha[:16]}")
    return ", ".join(parts)


def _sources(leaves: list[str], fields: dict[str, Fitted], base: Topology, origin: str
             ) -> dict[str, str]:
    """One entry per fitted field; the base's entries, marked kept, for the rest. A base entry
    for a whole section stays one entry: the fitted fields under it have their own, and the
    longest matching key is a field's source."""
    out: dict[str, str] = {}
    for leaf in leaves:
        if leaf in fields:
            out[leaf] = _calibrated_text(fields[leaf], origin)
            continue
        key = max((k for k in base.sources if leaf == k or leaf.startswith(k + ".")), key=len,
                  default="")
        text = base.sources.get(key) or "(the base gives no source)"
        out.setdefault(key or leaf, f"not measured here; kept from base {base.name}: {text}")
    return out


def _calibrated_text(f: Fitted, origin: str) -> str:
    unit = f" {f.unit}" if f.unit else ""
    value = f"{f.value:g}{unit} (no error estimate)" if math.isnan(f.err) else \
        f"{f.value:g} ± {f.err:.2g}{unit}"
    text = (f"calibrated: {value} from {f.points} measurement(s) of {f.op} in {origin}; "
            f"fit rel rms {100 * f.rel_rms:.2g}%")
    return f"{text}; {f.note}" if f.note else text
