"""``pkbsim analyze`` of one task as a terminal table (rich)."""

from __future__ import annotations

from rich.table import Table

from pkbsim.analysis import AnalysisResult
from pkbsim.report.text import to_text
from pkbsim.roofline import CommBound, ComputeBound
from pkbsim.units import US, format_bytes, format_us


def _flops(x: float) -> str:
    if x == 0:
        return "-"
    for unit, scale in (("TF", 1e12), ("GF", 1e9), ("MF", 1e6), ("kF", 1e3)):
        if x >= scale:
            return f"{x / scale:.3g} {unit}"
    return f"{x:.3g} F"


def analysis_table(result: AnalysisResult) -> str:
    inst, topo, roof = result.instance, result.topology, result.roofline
    spec = inst.spec
    alias = f" ({', '.join(spec.aliases)})" if spec.aliases else ""
    head = (f"{spec.label}{alias}: {spec.title}\n"
            f"Topology {topo.name}: {topo.nodes} x {topo.gpus_per_node} x {topo.gpu.model}, "
            f"{topo.peer_line_rate_GBps:g} GB/s per GPU per direction to peers"
            f"{', NVLS' if topo.scale_up.in_switch_reduction else ''}\n"
            f"World size {inst.world_size}, preset {inst.preset}"
            + (f", --set {_sets(result)}" if _sets(result) else ""))
    ops = Table(title="Per op (all repeats; times in us)", title_justify="left",
                show_edge=False, pad_edge=False)
    for col in ("op", "kind", "x", "bytes/rank", "FLOPs", "HBM bytes", "t_comm", "t_mem",
                "t_comp", "bound by"):
        ops.add_column(col, justify="left" if col in ("op", "kind", "bound by") else "right",
                       overflow="fold")
    comm = {b.op.id: b for b in roof.comm}
    compute = {c.op.id: c for c in roof.compute}
    for op in inst.ops:
        if op.id in comm:
            ops.add_row(*_comm_row(comm[op.id]))
        else:
            ops.add_row(*_compute_row(compute[op.id]))
    ops.add_section()
    ops.add_row("total", "", "", "", _flops(sum(c.op.flops * c.op.repeat for c in roof.compute)),
                format_bytes(sum(c.op.hbm_bytes * c.op.repeat for c in roof.compute)),
                format_us(roof.t_comm_s), format_us(roof.t_mem_s), format_us(roof.t_comp_s), "")
    bounds = Table(title="Roofline (us)", title_justify="left", show_edge=False, pad_edge=False)
    bounds.add_column("term")
    bounds.add_column("us", justify="right")
    bounds.add_column("what it is")
    rows = [
        ("t_comm", roof.t_comm_s, "busiest link, best mechanism at its achievable rate"
         + (f" ({roof.busiest_link})" if roof.busiest_link else "")),
        ("t_comm at line rate", roof.t_comm_line_rate_s, "same bytes at 100% of line rate"),
        ("t_comm without in-switch reduction", roof.t_comm_no_switch_reduction_s,
         "no NVLS (multimem.ld_reduce)"),
        ("t_mem", roof.t_mem_s, f"HBM bytes at {topo.gpu.hbm_bandwidth_GBps:g} GB/s"),
        ("t_comp", roof.t_comp_s, "FLOPs at the dtype's dense peak"),
        ("t_latency_floor", roof.t_latency_floor_s,
         f"1 kernel launch + {roof.sync_steps_critical_path} cross-GPU sync step(s)"),
    ]
    for name, value, what in rows:
        bounds.add_row(name, format_us(value), what)
    bounds.add_section()
    bounds.add_row("t_roof", format_us(roof.t_roof_s), f"binding: {roof.binding}")
    lines = [head, ""]
    why = ["Why:"] + [f"  {b.op.id}: {b.reason}" for b in roof.comm]
    tail = _prediction_lines(result)
    if result.measured_us is not None and result.attainment is not None:
        tail.append(f"Measured {result.measured_us:g} us: attainment t_roof / measured = "
                    f"{result.attainment:.1%} ({result.measured_us * US / roof.t_roof_s:.1f}x "
                    f"off the roofline)")
    return "\n".join(lines) + to_text(ops, "", bounds, "") + "\n".join(why + tail) + "\n"


def _prediction_lines(result: AnalysisResult) -> list[str]:
    if not result.predictions:
        return []
    lines = ["", "Predicted (pkbsim simulate; steady state per iteration, slowest rank):"]
    notes = {"nccl_reference": "PKB's reference: eager PyTorch + NCCL",
             "custom_best": "the best kernel this machine allows"}
    for name in ("nccl_reference", "custom_best"):
        sim = result.predictions.get(name)
        if sim is not None:
            lines.append(f"  {name:<15} {format_us(sim.predicted_us * US):>9} us  bound by "
                         f"{sim.bound_by}; {notes[name]}")
    ref = result.predictions.get("nccl_reference")
    if ref is not None:
        from pkbsim.trace.store import reference_text

        lines.append("  reference model: " + reference_text(ref.strategy.program))
    return lines


def _sets(result: AnalysisResult) -> str:
    pairs = {**result.instance.overrides, **result.topology_overrides}
    return " ".join(f"{k}={v}" for k, v in pairs.items())


def _comm_row(b: CommBound) -> list[str]:
    op = b.op
    group = f"@{op.group}" if op.group != "world" else ""
    return [op.id, f"{op.kind}{group}", str(op.repeat), format_bytes(op.bytes_per_rank), "-",
            "-", format_us(b.best.t_bw_s), "-", "-", f"{b.best.mechanism}/{b.best.algorithm}"]


def _compute_row(c: ComputeBound) -> list[str]:
    op = c.op
    return [op.id, f"compute:{op.kind}", str(op.repeat), "-", _flops(op.flops * op.repeat),
            format_bytes(op.hbm_bytes * op.repeat), "-", format_us(c.t_mem_s),
            format_us(c.t_comp_s), f"{op.dtype} on {c.peak_key} peak"]
