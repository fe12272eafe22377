"""``pkbsim simulate`` as a terminal table and as JSON (schema ``pkbsim.simulation/1``).

JSON fields are a stable contract: add, never rename or remove without a schema bump. Times
are microseconds (``_us``), sizes bytes, utilisations fractions of capacity.
"""

from __future__ import annotations

from typing import Any

from rich.table import Table

from pkbsim import __version__
from pkbsim.datafiles import display_path
from pkbsim.files import json_text
from pkbsim.report.text import to_text
from pkbsim.roofline import Roofline
from pkbsim.sim.result import SimResult
from pkbsim.sim.strategies import CommChoice, Strategy
from pkbsim.trace.store import reference_dict, reference_text
from pkbsim.units import US, format_bytes

SCHEMA = "pkbsim.simulation/1"
TOP_LINKS = 12


def _num(x: float) -> str:
    if x == 0:
        return "0"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    if abs(x) >= 1:
        return f"{x:.2f}"
    return f"{x:.3g}"


def how(choice: CommChoice | None) -> str:
    if choice is None:
        return "-"
    proto = f" {choice.protocol}" if choice.protocol and not choice.mechanism.startswith(
        "nccl_") else ""
    pieces = f" x{choice.pieces} pieces" if choice.pieces > 1 else ""
    chunks = f", {choice.chunks} chunks" if choice.chunks > 1 else ""
    sms = f", {choice.sms} SMs" if choice.sms else ""
    return f"{choice.mechanism}{proto}/{choice.algorithm}{chunks}{sms}{pieces}"


def sim_table(result: SimResult, roof: Roofline) -> str:
    inst, topo = result.instance, result.topology
    spec = inst.spec
    alias = f" ({', '.join(spec.aliases)})" if spec.aliases else ""
    sets = {**inst.overrides, **result.topology_overrides}
    strategy = result.strategy
    extra = ""
    if strategy.overrides:
        extra = "; overrides " + ", ".join(
            f"{op}.{k}={v}" for op, ov in sorted(strategy.overrides.items())
            for k, v in sorted(vars(ov).items()) if v is not None)
    tried = ""
    if result.tried:
        tried = " (pieces tried: " + ", ".join(
            f"{k}: {_num(v)} us" for k, v in sorted(result.tried.items())) + ")"
    t_roof = roof.t_roof_s / US
    head = [
        f"{spec.label}{alias} on {topo.name}, W = {inst.world_size}, "
        f"preset {inst.preset}" + (" --set " + " ".join(f"{k}={v}" for k, v in sets.items())
                                   if sets else ""),
        f"Strategy {strategy.name} ({strategy.source}){extra}; each op in {result.pieces} "
        f"piece(s){tried}",
        *([f"Reference model: {reference_model(strategy)}"]
          if strategy.name == "nccl_reference" else []),
        f"Host model: {strategy.host_model} (what issues each call; docs/metrics.md 9.4)",
        f"Predicted {_num(result.predicted_us)} us per iteration (slowest rank "
        f"{result.slowest_rank}; steady state of {result.iterations} back-to-back iterations)",
        f"Roofline t_roof {_num(t_roof)} us ({roof.binding}): predicted / t_roof = "
        + (f"{result.predicted_us / t_roof:.1f}x" if t_roof > 0 else "-"),
        f"Critical path bound by: {result.bound_by} ("
        + ", ".join(f"{k} {_num(v)} us" for k, v in sorted(result.critical_shares.items()))
        + ")",
        f"Simulation: {result.symmetry} (docs/simulation.md)",
        "",
    ]
    ops = Table(title="Per op (the measured iteration; times in us)", title_justify="left",
                show_edge=False, pad_edge=False)
    for col in ("op", "kind", "x", "bytes/rank", "how", "gpu", "host", "start", "end"):
        ops.add_column(col, justify="left" if col in ("op", "kind", "how") else "right",
                       overflow="fold")
    by_id = {op.id: op for op in inst.ops}
    segments = _segments(result)
    for t in result.ops:
        if t.id in segments:  # a traced program's segment
            seg = segments[t.id]
            repeat, size = seg.times, (format_bytes(seg.collective.bytes)
                                       if seg.collective is not None else "-")
            kind = t.kind
        else:
            op = by_id[t.id]
            repeat = op.repeat
            size = format_bytes(op.bytes_per_rank) if op.category == "comm" else "-"  # type: ignore[union-attr]
            kind = t.kind if t.category == "comm" else f"compute:{t.kind}"
        ops.add_row(t.id, kind, str(repeat), size, how(t.choice), _num(t.gpu_us),
                    _num(t.host_us), _num(t.start_us), _num(t.end_us))
    links = Table(title="Busiest links (whole run)", title_justify="left", show_edge=False,
                  pad_edge=False)
    for col in ("link", "kind", "utilisation", "bytes"):
        links.add_column(col, justify="left" if col in ("link", "kind") else "right")
    for use in result.links[:6]:
        links.add_row(use.id, use.kind, f"{use.utilization:.1%}", format_bytes(use.wire_bytes))
    sm = result.sm_utilization
    lines = [f"SM utilisation per rank: {min(sm):.1%} to {max(sm):.1%}" if sm else "",
             "Critical path of the measured iteration (us from its start, docs/metrics.md "
             "9.1):"]
    t0 = result.iteration_start_us
    for seg in result.critical_path:
        lines.append(f"  r{seg.rank} {seg.track:<8} {seg.name:<28} {_num(seg.start_us - t0):>9}"
                     f" -> {_num(seg.end_us - t0):>9} us  {seg.why}")
    return "\n".join(head) + to_text(ops, "", links, "") + "\n".join(lines) + "\n"


def _choice(c: CommChoice | None) -> dict[str, Any] | None:
    if c is None:
        return None
    return {"algorithm": c.algorithm, "mechanism": c.mechanism, "protocol": c.protocol,
            "chunks": c.chunks, "pieces": c.pieces, "sms": c.sms,
            "nccl_estimate_us": c.estimate_us}


def to_dict(result: SimResult, roof: Roofline) -> dict[str, Any]:
    inst, topo, strategy = result.instance, result.topology, result.strategy
    spec = inst.spec
    return {
        "schema": SCHEMA,
        "pkbsim_version": __version__,
        "task": {"id": spec.problem_id, "name": spec.name, "key": spec.key,
                 "aliases": list(spec.aliases), "file": display_path(spec.file),
                 "sha256": spec.sha256,
                 **({"traced_from": spec.traced_from} if spec.traced_from else {})},
        "topology": {"name": topo.name, "file": display_path(topo.file), "sha256": topo.sha256},
        "world_size": inst.world_size,
        "preset": inst.preset,
        "strategy": {
            "name": strategy.name, "source": strategy.source, "pieces": result.pieces,
            "pieces_tried": {str(k): v for k, v in sorted(result.tried.items())},
            "overrides": {op: {k: v for k, v in vars(ov).items() if v is not None}
                          for op, ov in sorted(strategy.overrides.items())},
            **({"reference_model": reference_model(strategy),
                "reference_program": reference_model_dict(strategy)}
               if strategy.name == "nccl_reference" else {}),
            "host_model": strategy.host_model,
        },
        "iterations": result.iterations,
        "predicted_us": result.predicted_us,
        "per_rank_us": list(result.per_rank_us),
        "slowest_rank": result.slowest_rank,
        "window_us": list(result.window_us),
        "iteration_start_us": result.iteration_start_us,
        "makespan_us": result.makespan_us,
        "bound_by": result.bound_by,
        "critical_path_us": {k: round(v, 6) for k, v in sorted(result.critical_shares.items())},
        "roofline": {"t_roof_us": round(roof.t_roof_s / US, 6), "binding": roof.binding,
                     "predicted_over_roof": round(result.predicted_us / (roof.t_roof_s / US), 6)
                     if roof.t_roof_s > 0 else None},
        "ops": [{"id": t.id, "category": t.category, "kind": t.kind, "gpu_us": t.gpu_us,
                 "host_us": t.host_us, "start_us": t.start_us, "end_us": t.end_us,
                 "how": _choice(t.choice)} for t in result.ops],
        "links": [{"id": u.id, "kind": u.kind, "utilization": u.utilization,
                   "bytes": u.wire_bytes} for u in result.links[:TOP_LINKS]],
        "sm_utilization": list(result.sm_utilization),
        "critical_path": [{"rank": s.rank, "track": s.track, "name": s.name,
                           "start_us": s.start_us, "end_us": s.end_us, "why": s.why}
                          for s in result.critical_path],
        "simulation": result.symmetry,
        "events": {"flows": result.flows_started, "rate_updates": result.rate_updates,
                   "nodes": len(result.nodes)},
        "provenance": {
            "pkbsim_version": __version__,
            "task_file": display_path(spec.file), "task_sha256": spec.sha256,
            "topology_file": display_path(topo.file), "topology_sha256": topo.sha256,
            "parameters": dict(inst.values), "task_overrides": dict(inst.overrides),
            "topology_overrides": dict(result.topology_overrides),
        },
    }


def render_json(result: SimResult, roof: Roofline) -> str:
    return json_text(to_dict(result, roof), indent=2) + "\n"


def _segments(result: SimResult) -> dict[str, Any]:
    chosen = result.strategy.program if result.strategy.name == "nccl_reference" else None
    if chosen is None:
        return {}
    return {f"seg{i}": seg for i, seg in enumerate(chosen.program.segments)}


def reference_model(strategy: Strategy) -> str:
    """Which program the reference ran: a traced one (where and how) or the task file's ops."""
    return reference_text(strategy.program)


def reference_model_dict(strategy: Strategy) -> dict[str, Any]:
    return reference_dict(strategy.program)
