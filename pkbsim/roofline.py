"""Roofline bounds for a task instance on a topology.

t_comm: the busiest link's bytes over its rate, each comm op carried by its best (algorithm,
mechanism) pair; t_mem: compute ops' HBM bytes over HBM bandwidth; t_comp: FLOPs over the dtype's
peak; t_latency_floor: one kernel launch plus the cross-GPU synchronisations on the critical path.
t_roof is the largest of the four. Formulas and a worked example: docs/metrics.md.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from pkbsim.bounds import check_result
from pkbsim.collectives import ALGORITHMS, algbw_busbw, algorithms_for
from pkbsim.errors import InfeasibleError
from pkbsim.placement import (
    Loads,
    fabric_for,
    fits,
    group_context,
    group_members,
    line_time_by_kind,
    link_efficiency,
    link_loads,
    network_reduces,
)
from pkbsim.task.schema import CommOp, ComputeOp, TaskInstance
from pkbsim.topology.fabric import NIC, Fabric
from pkbsim.topology.schema import Topology
from pkbsim.units import US, format_bytes


@dataclass(frozen=True)
class Candidate:
    """One way to carry a comm op: an algorithm on a mechanism."""

    algorithm: str
    mechanism: str
    steps: int
    t_bw_s: float  # busiest link at the mechanism's achievable rate
    t_alpha_s: float  # the mechanism's fixed and per-step latency
    switch_reduction: bool

    @property
    def t_total_s(self) -> float:
        return self.t_alpha_s + self.t_bw_s


@dataclass(frozen=True)
class CommBound:
    op: CommOp
    best: Candidate  # least bandwidth time: the bound
    best_no_switch_reduction: Candidate | None
    best_at_size: Candidate  # least alpha + bandwidth time at this size
    line_algorithm: str
    t_line_s: float
    t_line_no_switch_reduction_s: float
    egress_bytes: float  # busiest GPU's peer-fabric egress under ``best`` (all repeats)
    ingress_bytes: float
    nic_bytes: float  # busiest NIC direction under ``best``
    min_steps: int
    sync_latency_s: float
    busbw_at_bound_Bps: float
    reason: str
    line_algorithm_no_switch_reduction: str = ""
    candidates: tuple[Candidate, ...] = ()
    loads: dict[str, Loads] = field(default_factory=dict, hash=False, repr=False,
                                    compare=False)  # link bytes per algorithm


@dataclass(frozen=True)
class ComputeBound:
    op: ComputeOp
    peak_key: str
    t_comp_s: float
    t_mem_s: float


@dataclass(frozen=True)
class Roofline:
    t_comm_s: float
    t_comm_line_rate_s: float
    t_comm_no_switch_reduction_s: float
    t_comm_line_rate_no_switch_reduction_s: float
    t_mem_s: float
    t_comp_s: float
    t_latency_floor_s: float
    binding: str
    busiest_link: str | None
    comm: tuple[CommBound, ...] = ()
    compute: tuple[ComputeBound, ...] = ()
    sync_steps_critical_path: int = 0
    notes: tuple[str, ...] = field(default=())

    @property
    def t_roof_s(self) -> float:
        return max(self.t_comm_s, self.t_mem_s, self.t_comp_s, self.t_latency_floor_s)


# ------------------------------------------------------------------ per op

def bound_comm_op(op: CommOp, inst: TaskInstance, fabric: Fabric) -> CommBound:
    """Every applicable (algorithm, mechanism) for ``op``; the best one is its bound."""
    topo = fabric.topo
    members = group_members(op, inst.world_size)[0]
    ctx = group_context(op, members, topo)
    in_one_node = ctx.nodes == 1
    candidates: list[Candidate] = []
    loads_by_alg: dict[str, Loads] = {}
    ports: dict[str, tuple[float, float, float]] = {}
    line: dict[str, float] = {}
    steps_by_alg: dict[str, int] = {}
    for alg in algorithms_for(op.kind, ctx):
        # NVLS works inside one NVLink domain: alone in one node, or per node (NVLSTree)
        nvls_ok = in_one_node or alg.hierarchical
        if alg.needs_switch_reduction and not (topo.scale_up.in_switch_reduction and nvls_ok):
            continue
        if alg.needs_multicast and not (topo.scale_up.multicast and in_one_node):
            continue
        if alg.needs_network_reduction and not network_reduces(topo):
            continue
        loads = link_loads(alg, op, inst.world_size, fabric)
        loads_by_alg[alg.name] = loads
        ports[alg.name] = _port_bytes(loads, fabric)
        by_kind = line_time_by_kind(loads, fabric)
        line[alg.name] = max(by_kind.values(), default=0.0)
        steps = alg.steps(op.kind, ctx)
        steps_by_alg[alg.name] = steps
        for mech in topo.mechanisms.values():
            if not fits(alg, mech, op.kind):
                continue
            t_bw = max((t / link_efficiency(topo, mech, kind) for kind, t in by_kind.items()),
                       default=0.0)
            alpha = (mech.latency_s + steps * mech.step_latency_s) * op.repeat
            candidates.append(Candidate(alg.name, mech.name, steps, t_bw, alpha,
                                        alg.needs_switch_reduction))
    if not candidates:
        raise InfeasibleError(f"no algorithm and mechanism on {topo.name} can carry "
                              f"{op.kind} (op {op.id})")

    def key(c: Candidate) -> tuple[float, int, float]:
        return (c.t_bw_s, c.steps, c.t_alpha_s)

    best = min(candidates, key=key)
    plain = [c for c in candidates if not c.switch_reduction]
    best_plain = min(plain, key=key) if plain else None
    at_size = min(candidates, key=lambda c: (c.t_total_s, c.t_bw_s))
    line_alg = min(line, key=lambda name: (line[name], steps_by_alg[name]))
    plain_algs = [a for a in line if not ALGORITHMS[a].needs_switch_reduction] or [line_alg]
    plain_line_alg = min(plain_algs, key=lambda name: (line[name], steps_by_alg[name]))
    egress, ingress, nic = ports[best.algorithm]
    min_steps = min(steps_by_alg.values())
    sync = (topo.scale_up.signal_latency_us if in_one_node
            else (topo.scale_out.latency_us if topo.scale_out else 0.0)) * US
    per_call = best.t_bw_s / max(op.repeat, 1)
    busbw = algbw_busbw(op.kind, op.bytes_per_rank, op.group_size, per_call)[1] if (
        per_call > 0) else 0.0
    bound = CommBound(
        op=op, best=best, best_no_switch_reduction=best_plain, best_at_size=at_size,
        line_algorithm=line_alg, t_line_s=line[line_alg],
        t_line_no_switch_reduction_s=line[plain_line_alg],
        line_algorithm_no_switch_reduction=plain_line_alg,
        egress_bytes=egress, ingress_bytes=ingress, nic_bytes=nic, min_steps=min_steps,
        sync_latency_s=sync, busbw_at_bound_Bps=busbw,
        reason=_reason(op, best, at_size, topo, ports),
        candidates=tuple(sorted(candidates, key=key)), loads=loads_by_alg,
    )
    return bound


def _port_bytes(loads: Loads, fabric: Fabric) -> tuple[float, float, float]:
    egress = ingress = nic = 0.0
    for link_id, nbytes in loads.items():
        kind = fabric.link(link_id).kind
        if kind == NIC:
            nic = max(nic, nbytes)
        elif link_id.endswith(".out"):
            egress = max(egress, nbytes)
        elif link_id.endswith(".in"):
            ingress = max(ingress, nbytes)
    return egress, ingress, nic


def _reason(op: CommOp, best: Candidate, at_size: Candidate, topo: Topology,
            ports: dict[str, tuple[float, float, float]]) -> str:
    m = op.bytes_per_rank * op.repeat * op.imbalance
    mech = topo.mechanisms[best.mechanism]

    def factor(alg: str) -> float:
        return max(ports[alg]) / m if m else 0.0

    others = sorted((a for a in ports if a != best.algorithm), key=factor)
    text = (f"{best.algorithm} puts {factor(best.algorithm):.3g}x the buffer on the busiest "
            f"port; {best.mechanism} reaches {mech.efficiency:.0%} of line rate")
    if others:
        text += f" ({others[0]}: {factor(others[0]):.3g}x)"
    if (at_size.algorithm, at_size.mechanism) != (best.algorithm, best.mechanism):
        text += (f"; at this size {at_size.mechanism}/{at_size.algorithm} is faster once "
                 f"latency counts ({at_size.t_total_s / US:.3g} us vs "
                 f"{best.t_total_s / US:.3g} us)")
    if m and m / max(op.group_size, 1) < mech.min_efficient_message_bytes:
        text += (f"; messages here are below {best.mechanism}'s efficient size "
                 f"({format_bytes(mech.min_efficient_message_bytes)})")
    return text


# ------------------------------------------------------------------ compute

def peak_key(op: ComputeOp, topo: Topology) -> str:
    peaks = topo.gpu.peak_tflops
    if op.tensor_core:
        wanted = {"bf16": "bf16_tensor", "fp16": "fp16_tensor", "fp8": "fp8_tensor",
                  "tf32": "tf32_tensor", "fp32": "tf32_tensor", "fp64": "fp64_tensor"}
        key = wanted.get(op.dtype, "bf16_tensor")
        for candidate in (key, "bf16_tensor"):
            if candidate in peaks:
                return candidate
    return "fp64" if op.dtype == "fp64" and "fp64" in peaks else "fp32"


def bound_compute_op(op: ComputeOp, topo: Topology) -> ComputeBound:
    key = peak_key(op, topo)
    scale = op.repeat * op.imbalance  # the busiest rank
    t_comp = op.flops * scale / (topo.gpu.peak_tflops[key] * 1e12)
    t_mem = op.hbm_bytes * scale / topo.gpu.hbm_Bps
    return ComputeBound(op, key, t_comp, t_mem)


# ------------------------------------------------------------------ task

def check_world_size(inst: TaskInstance, topo: Topology) -> None:
    if inst.world_size > topo.total_gpus:
        raise InfeasibleError(
            f"world size {inst.world_size} needs {inst.world_size} GPUs; topology {topo.name} "
            f"has {topo.total_gpus} ({topo.nodes} node(s) x {topo.gpus_per_node})")


def roofline(inst: TaskInstance, topo: Topology) -> Roofline:
    check_world_size(inst, topo)
    fabric = fabric_for(topo)
    comm: list[CommBound] = []
    compute: list[ComputeBound] = []
    achieved: Loads = defaultdict(float)  # link -> seconds, each op at its own mechanism
    plain: Loads = defaultdict(float)
    line: Loads = defaultdict(float)
    plain_line: Loads = defaultdict(float)
    for op in inst.ops:
        if isinstance(op, ComputeOp):
            compute.append(bound_compute_op(op, topo))
            continue
        b = bound_comm_op(op, inst, fabric)
        comm.append(b)
        _accumulate(achieved, b.loads[b.best.algorithm], fabric, topo, b.best.mechanism)
        fallback = b.best_no_switch_reduction or b.best
        _accumulate(plain, b.loads[fallback.algorithm], fabric, topo, fallback.mechanism)
        _accumulate(line, b.loads[b.line_algorithm], fabric, topo, None)
        _accumulate(plain_line, b.loads[b.line_algorithm_no_switch_reduction], fabric, topo,
                    None)
    t_comm, busiest = _max(achieved)
    t_mem = _busiest_rank(compute, inst.world_size, lambda c: c.t_mem_s)
    t_comp = _busiest_rank(compute, inst.world_size, lambda c: c.t_comp_s)
    steps, t_sync = _critical_syncs(inst, comm)
    # one launch, unless there is nothing to do: every op skipped (repeat 0) or a call in a
    # group of one rank (no peer to reach, and its output may be its input)
    work = any(op.repeat > 0 and (isinstance(op, ComputeOp) or op.group_size > 1)
               for op in inst.ops)
    # the cheapest launch there is: in a graph, or eager where a topology measured that cheaper
    launch_us = min(topo.latency.kernel_launch_us, topo.latency.eager_kernel_us)
    t_floor = (launch_us * US if work else 0.0) + t_sync
    terms = {"comm": t_comm, "memory": t_mem, "compute": t_comp, "latency": t_floor}
    binding = max(terms, key=lambda k: terms[k])
    comm_variants = {"t_comm_line_rate": _max(line)[0],
                     "t_comm_no_switch_reduction": _max(plain)[0],
                     "t_comm_line_rate_no_switch_reduction": _max(plain_line)[0]}
    for name, t in {**{f"t_{k}": v for k, v in terms.items()}, **comm_variants}.items():
        check_result(t, f"task {inst.spec.key}: the roofline's {name}")
    return Roofline(
        t_comm_s=t_comm, t_comm_line_rate_s=comm_variants["t_comm_line_rate"],
        t_comm_no_switch_reduction_s=comm_variants["t_comm_no_switch_reduction"],
        t_comm_line_rate_no_switch_reduction_s=comm_variants[
            "t_comm_line_rate_no_switch_reduction"],
        t_mem_s=t_mem, t_comp_s=t_comp, t_latency_floor_s=t_floor, binding=binding,
        busiest_link=busiest, comm=tuple(comm), compute=tuple(compute),
        sync_steps_critical_path=steps,
    )


def _busiest_rank(compute: list[ComputeBound], world_size: int,
                  term: Callable[[ComputeBound], float]) -> float:
    """The largest per-rank sum; ops marked root or non_root count only where they run."""
    if all(c.op.ranks == "all" for c in compute):
        return sum(term(c) for c in compute)
    roles = {0} | {c.op.root for c in compute} | ({1} if world_size > 1 else set())
    for r in range(world_size):  # one rank that is none of the roots, if any exists
        if r not in roles:
            roles.add(r)
            break
    return max(sum(term(c) for c in compute if c.op.runs_on(r)) for r in roles)


def _accumulate(total: Loads, loads: Loads, fabric: Fabric, topo: Topology,
                mechanism: str | None) -> None:
    mech = topo.mechanisms[mechanism] if mechanism else None
    for link_id, nbytes in loads.items():
        link = fabric.link(link_id)
        eff = link_efficiency(topo, mech, link.kind) if mech else 1.0
        total[link_id] += nbytes / (link.line_Bps * eff)


def _max(times: Loads) -> tuple[float, str | None]:
    if not times:
        return 0.0, None
    link = max(times, key=lambda k: times[k])
    return times[link], link


def _critical_syncs(inst: TaskInstance, comm: list[CommBound]) -> tuple[int, float]:
    """Longest chain of sync steps through the graph of op instances (compute ops add none).

    Repeat i of an op depends on repeat i - 1 when the op is ``chain``; an op that follows one
    with as many repeats pairs with it (repeat i after repeat i: an owner loop can pipeline),
    otherwise it waits for every repeat of the ops it follows.
    """
    by_id = {b.op.id: b for b in comm}

    def later(a: tuple[int, float], b: tuple[int, float]) -> tuple[int, float]:
        return b if b[1] > a[1] else a

    finish: dict[str, list[tuple[int, float]]] = {}
    for op in inst.ops:
        count = max(op.repeat, 1)
        b = by_id.get(op.id)
        steps = b.min_steps if b is not None and op.repeat > 0 else 0
        step = (steps, steps * b.sync_latency_s if b is not None else 0.0)
        start_all: tuple[int, float] = (0, 0.0)
        paired = []
        for d in op.after:
            if len(finish[d]) == count:
                paired.append(finish[d])
            else:  # wait for every instance of d
                start_all = later(start_all, max(finish[d], key=lambda x: x[1]))
        out: list[tuple[int, float]] = []
        for i in range(count):
            start = start_all
            for done in paired:
                start = later(start, done[i])
            if op.chain and i:
                start = later(start, out[i - 1])
            out.append((start[0] + step[0], start[1] + step[1]))
        finish[op.id] = out
    if not finish:
        return 0, 0.0
    return max((p for points in finish.values() for p in points), key=lambda x: x[1])
