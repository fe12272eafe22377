"""The JSON contract of ``pkbsim analyze --format json`` (schema ``pkbsim.analysis/1``).

Fields here are a stable contract: add, never rename or remove without a schema bump.
Times are microseconds (``_us``), sizes bytes, bandwidths GB/s (1e9 B/s, per GPU, one way).
"""

from __future__ import annotations

from typing import Any

from pkbsim import __version__
from pkbsim.analysis import AnalysisResult
from pkbsim.datafiles import display_path
from pkbsim.files import json_text
from pkbsim.report.text import json_count, json_us
from pkbsim.roofline import Candidate, CommBound, ComputeBound
from pkbsim.units import GB

SCHEMA = "pkbsim.analysis/1"


def _candidate(c: Candidate | None) -> dict[str, Any] | None:
    if c is None:
        return None
    return {"algorithm": c.algorithm, "mechanism": c.mechanism, "sync_steps": c.steps,
            "t_bandwidth_us": json_us(c.t_bw_s), "t_latency_us": json_us(c.t_alpha_s),
            "t_total_us": json_us(c.t_total_s)}


def _comm(b: CommBound) -> dict[str, Any]:
    op = b.op
    return {
        "id": op.id, "category": "comm", "kind": op.kind, "api": op.api,
        "bytes_per_rank": json_count(op.bytes_per_rank), "dtype": op.dtype, "flops": 0,
        "hbm_bytes": 0,
        "group": op.group, "group_size": op.group_size, "group_layout": op.group_layout,
        "root": op.root if op.kind in ("broadcast", "reduce", "scatter", "gather") else None,
        "reduce_op": op.reduce_op, "pattern": op.pattern, "data_dependent": op.data_dependent,
        "imbalance": op.imbalance, "repeat": op.repeat, "chain": op.chain,
        "rotate_root": op.rotate_root, "after": list(op.after), "host_syncs": op.host_syncs,
        "algorithm": b.best.algorithm, "mechanism": b.best.mechanism,
        "t_comm_us": json_us(b.best.t_bw_s),
        "t_comm_line_rate_us": json_us(b.t_line_s), "line_rate_algorithm": b.line_algorithm,
        "t_comm_no_switch_reduction_us": json_us(
            (b.best_no_switch_reduction or b.best).t_bw_s),
        "t_comm_line_rate_no_switch_reduction_us": json_us(b.t_line_no_switch_reduction_s),
        "egress_bytes": json_count(b.egress_bytes), "ingress_bytes": json_count(b.ingress_bytes),
        "nic_bytes": json_count(b.nic_bytes), "min_sync_steps": b.min_steps,
        "busbw_at_bound_GBps": round(b.busbw_at_bound_Bps / GB, 6),
        "best_at_size": _candidate(b.best_at_size),
        "best_no_switch_reduction": _candidate(b.best_no_switch_reduction),
        "reason": b.reason, "note": op.note,
    }


def _compute(c: ComputeBound) -> dict[str, Any]:
    op = c.op
    return {
        "id": op.id, "category": "compute", "kind": "compute", "compute_kind": op.kind,
        "bytes_per_rank": 0, "dtype": op.dtype, "flops": json_count(op.flops),
        "hbm_bytes": json_count(op.hbm_bytes), "ranks": op.ranks, "imbalance": op.imbalance,
        "tensor_core": op.tensor_core, "peak": c.peak_key, "repeat": op.repeat,
        "chain": op.chain, "after": list(op.after), "host_syncs": op.host_syncs,
        "launches": op.launches, "t_comp_us": json_us(c.t_comp_s), "t_mem_us": json_us(c.t_mem_s),
        "note": op.note,
    }


def _prediction(result: AnalysisResult) -> dict[str, Any] | None:
    """Both strategies' simulated times (``pkbsim simulate``); null with --no-predict."""
    if not result.predictions:
        return None
    out: dict[str, Any] = {}
    for name, sim in sorted(result.predictions.items()):
        out[f"{name}_us"] = sim.predicted_us
        out[f"{name}_bound_by"] = sim.bound_by
    best = result.predictions.get("custom_best")
    if best is not None:
        out["custom_best_pieces"] = best.pieces
    ref = result.predictions.get("nccl_reference")
    if ref is not None:
        from pkbsim.trace.store import reference_dict

        out["nccl_reference_model"] = reference_dict(ref.strategy.program)
    if result.measured_us is not None and ref is not None:
        out["measured_over_nccl_reference"] = round(result.measured_us / ref.predicted_us, 6)
    return out


def to_dict(result: AnalysisResult) -> dict[str, Any]:
    inst, topo, roof = result.instance, result.topology, result.roofline
    spec = inst.spec
    by_id: dict[str, dict[str, Any]] = {b.op.id: _comm(b) for b in roof.comm}
    by_id.update({c.op.id: _compute(c) for c in roof.compute})
    attainment = result.attainment
    return {
        "schema": SCHEMA,
        "pkbsim_version": __version__,
        "task": {"id": spec.problem_id, "name": spec.name, "key": spec.key, "title": spec.title,
                 "aliases": list(spec.aliases), "parallelism": spec.parallelism,
                 "source": spec.source, "file": display_path(spec.file), "sha256": spec.sha256},
        "topology": {"name": topo.name, "description": topo.description,
                     "file": display_path(topo.file),
                     "sha256": topo.sha256, "gpu": topo.gpu.model,
                     "gpus_per_node": topo.gpus_per_node, "nodes": topo.nodes,
                     "peer_line_rate_GBps": topo.peer_line_rate_GBps,
                     "in_switch_reduction": topo.scale_up.in_switch_reduction,
                     "mechanisms": sorted(topo.mechanisms)},
        "world_size": inst.world_size,
        "preset": inst.preset,
        "parameters": dict(inst.values),
        "ops": [by_id[op.id] for op in inst.ops],
        "roofline": {
            "t_comm_us": json_us(roof.t_comm_s),
            "t_comm_line_rate_us": json_us(roof.t_comm_line_rate_s),
            "t_comm_no_switch_reduction_us": json_us(roof.t_comm_no_switch_reduction_s),
            "t_comm_line_rate_no_switch_reduction_us": json_us(
                roof.t_comm_line_rate_no_switch_reduction_s),
            "t_mem_us": json_us(roof.t_mem_s),
            "t_comp_us": json_us(roof.t_comp_s),
            "t_latency_floor_us": json_us(roof.t_latency_floor_s),
            "t_roof_us": json_us(roof.t_roof_s),
            "binding": roof.binding,
            "busiest_link": roof.busiest_link,
            "sync_steps_critical_path": roof.sync_steps_critical_path,
        },
        "prediction": _prediction(result),
        "measured_us": result.measured_us,
        "attainment": None if attainment is None else round(attainment, 6),
        "provenance": {
            "pkbsim_version": __version__,
            "task_file": display_path(spec.file), "task_sha256": spec.sha256,
            "topology_file": display_path(topo.file), "topology_sha256": topo.sha256,
            "world_size": inst.world_size, "preset": inst.preset,
            "parameters": dict(inst.values),
            "task_overrides": dict(inst.overrides),
            "topology_overrides": dict(result.topology_overrides),
        },
    }


def render(result: AnalysisResult) -> str:
    return json_text(to_dict(result), indent=2) + "\n"
