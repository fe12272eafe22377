"""Discrete-event simulation (simpy) of a task under a strategy: predicted time and timeline."""

from __future__ import annotations

from dataclasses import dataclass, replace

from pkbsim import symmetry
from pkbsim.bounds import check_result
from pkbsim.collectives import ALGORITHMS, algbw_busbw
from pkbsim.collectives.base import Context
from pkbsim.errors import InfeasibleError, UsageError
from pkbsim.placement import fabric_for, fits, group_context
from pkbsim.roofline import check_world_size
from pkbsim.sim import memory
from pkbsim.sim.collective import CallSpec
from pkbsim.sim.engine import SimOptions, Simulation, run_call
from pkbsim.sim.engine import comm_sms as held_sms
from pkbsim.sim.network import FlowBudget
from pkbsim.sim.result import SimResult, summarize
from pkbsim.sim.strategies import (
    CHUNK_CHOICES,
    STRATEGIES,
    Builder,
    Strategy,
    check_standalone_calls,
    nccl_call,
)
from pkbsim.task.schema import CommOp, ComputeOp, TaskInstance
from pkbsim.topology.schema import Topology
from pkbsim.trace.store import ChosenProgram, reference_program
from pkbsim.units import US, format_bytes

__all__ = ["STRATEGIES", "CollectiveResult", "SimOptions", "SimResult", "Strategy",
           "check_standalone_calls", "simulate", "simulate_collective", "simulate_nccl_call",
           "trace_stands_for"]


def simulate(inst: TaskInstance, topo: Topology, strategy: Strategy,
             options: SimOptions | None = None) -> SimResult:
    """Predict ``inst`` on ``topo`` under ``strategy``. custom_best without a fixed chunk count
    tries CHUNK_CHOICES in order, doubling the pieces while that makes it faster, and keeps the
    fastest (ties: fewer pieces). The calls it simulates alone are bounded before any is
    (SIM_CALLS); all its runs and those calls share one budget of transfers (SIM_FLOWS)."""
    check_world_size(inst, topo)
    check_standalone_calls(inst, strategy)
    options = options or SimOptions()
    budget = FlowBudget()
    # per-op overrides name the task file's ops: with them, auto keeps the task file's model
    if strategy.name == "nccl_reference" and strategy.program is None and (
            strategy.reference == "trace" or (strategy.reference == "auto"
                                              and not strategy.overrides)):
        chosen = reference_program(inst)
        if chosen is not None and strategy.reference == "auto" and not trace_stands_for(
                chosen, inst):
            chosen = None
        if chosen is None and strategy.reference == "trace":
            raise UsageError(f"task {inst.spec.key} has no traced reference program; use "
                             "--reference-model task, or trace it (pkbsim trace)")
        strategy = replace(strategy, program=chosen)
    if not any(isinstance(op, ComputeOp) for op in inst.ops):
        options = replace(options, hbm_contention=False)
    if strategy.name == "custom_best" and strategy.chunks is None:
        tried = {}
        for runs, k in enumerate(CHUNK_CHOICES, 1):  # double the pieces while that helps
            check_standalone_calls(inst, strategy, runs)
            tried[k] = _run(inst, topo, strategy, options, k, budget)
            if k > 1 and tried[k].predicted_us >= tried[k // 2].predicted_us:
                break
        best = min(tried, key=lambda k: (tried[k].predicted_us, k))
        return replace(tried[best], tried={k: r.predicted_us for k, r in tried.items()})
    return _run(inst, topo, strategy, options, strategy.chunks or 1, budget)


def trace_stands_for(chosen: ChosenProgram, inst: TaskInstance) -> bool:
    """Whether a traced program (rank 0's operators) can model ``inst``: not when the task
    file has a rank other than 0 do work rank 0 does not (``ranks: non_root`` with root 0:
    the slowest rank was never traced), nor when the traced rank receives more messages than it
    sends (it waits for other ranks' work, as a pipeline's later stage does: the program has
    only its own), nor when the instance communicates and the program has no collective (a
    trace at W = 1, where PKB's references skip their collectives)."""
    w = inst.world_size
    if any(isinstance(op, ComputeOp) and op.repeat > 0 and not op.runs_on(0)
           and any(op.runs_on(r) for r in range(1, w)) for op in inst.ops):
        return False
    communicates = any(isinstance(op, CommOp) and op.group_size > 1 and op.repeat > 0
                       for op in inst.ops)
    calls = {"send": 0, "recv": 0, "any": 0}
    for seg in chosen.program.segments:
        if seg.collective is not None:
            calls["any"] += seg.times
            if seg.collective.name in calls:
                calls[seg.collective.name] += seg.times
    if calls["recv"] > calls["send"]:
        return False  # the traced rank waits for another rank's work (a pipeline's later stage)
    return calls["any"] > 0 or not communicates


def _run(inst: TaskInstance, topo: Topology, strategy: Strategy, options: SimOptions,
         pieces: int, budget: FlowBudget) -> SimResult:
    """Build and run one simulation: one rank per class of equivalent ranks where the task
    and its calls allow it (pkbsim.symmetry), coarser classes when a call met while
    building needs them, every rank where none is left."""
    classes = symmetry.for_compute(symmetry.start(topo, inst.world_size, options.symmetry),
                                   inst.ops)
    builder: Builder | None = None
    while True:
        sim = Simulation(topo, inst.world_size, options, budget, classes)
        builder = Builder(sim, inst, strategy, pieces, classes, builder)
        try:
            # SIM_NODES, then SIM_MEMORY (the estimated peak of the ranks simulated): refused
            # before building
            builder.check_nodes(options.iterations)
            memory.check(builder, options.iterations,
                         classes.ranks if classes.symmetric else None,
                         builder.nodes_needed(options.iterations))
            builder.build(options.iterations)
        except symmetry.Asymmetric as why:
            classes = symmetry.restrict(classes, why.node_step, why.local_step, why.why)
            continue
        break
    sim.run()
    return summarize(sim, builder, inst, strategy, options.iterations)


@dataclass(frozen=True)
class CollectiveResult:
    """One collective call simulated alone (every rank enters at time 0)."""

    kind: str
    algorithm: str
    mechanism: str
    world_size: int
    nbytes: float  # per rank, nccl-tests' convention
    chunks: int
    time_s: float  # the slowest rank's finish
    per_rank_s: tuple[float, ...]
    flows: int  # transfers simulated (one flow each)
    rate_updates: int
    symmetry: str = ""  # which simulation ran: symmetric (classes) or full, and why

    @property
    def algbw_Bps(self) -> float:
        return algbw_busbw(self.kind, self.nbytes, self.world_size, self.time_s)[0]

    @property
    def busbw_Bps(self) -> float:
        return algbw_busbw(self.kind, self.nbytes, self.world_size, self.time_s)[1]


def described(sim: Simulation) -> str:
    """Which simulation ran (pkbsim.symmetry.Classes.describe)."""
    decided = sim.decided or symmetry.full(sim.world_size, "symmetry not looked for")
    return decided.describe()


def simulate_collective(topo: Topology, kind: str, nbytes: float, world_size: int,
                        algorithm: str, mechanism: str, chunks: int = 1, *, root: int = 0,
                        pattern: str | None = "ring", comm_sms: int | None = None,
                        start_latency: bool = True, symmetry: bool = True
                        ) -> CollectiveResult:
    """Time one call of ``algorithm`` on ``mechanism`` over ranks 0..world_size-1 of ``topo``
    (placed node by node), all entering at once. Latencies are the mechanism's: its
    ``latency_us`` once per rank (unless ``start_latency`` is False), ``step_latency_us`` per
    message inside a node and ``scale_out.latency_us`` per message across nodes."""
    if world_size > topo.total_gpus:
        raise InfeasibleError(f"world size {world_size} needs {world_size} GPUs; topology "
                              f"{topo.name} has {topo.total_gpus}")
    if algorithm not in ALGORITHMS:
        raise UsageError(f"unknown algorithm {algorithm!r}; expected one of "
                         + ", ".join(ALGORITHMS))
    if mechanism not in topo.mechanisms:
        raise UsageError(f"topology {topo.name} has no mechanism {mechanism!r}")
    alg, mech = ALGORITHMS[algorithm], topo.mechanisms[mechanism]
    per_node: dict[int, int] = {}
    for r in range(world_size):
        per_node[topo.node_of(r)] = per_node.get(topo.node_of(r), 0) + 1
    sizes = set(per_node.values())
    ctx = Context(n=world_size, root=root, pattern=pattern if kind == "send_recv" else None,
                  nodes=len(per_node), per_node=sizes.pop() if len(sizes) == 1 else 0)
    if not alg.applies(kind, ctx):
        raise UsageError(f"algorithm {algorithm} cannot carry {kind} on {world_size} ranks "
                         f"over {len(per_node)} node(s)")
    if not fits(alg, mech, kind):
        raise UsageError(f"mechanism {mechanism} cannot carry {algorithm} {kind}")
    net = topo.scale_out.latency_us * US if topo.scale_out else 0.0
    spec = CallSpec(alg, mech, kind, nbytes, ctx, chunks,
                    mech.latency_s if start_latency else 0.0, mech.step_latency_s, net,
                    held_sms(mech, comm_sms), kind)
    sim, nodes = run_call(topo, world_size, spec, list(range(world_size)),
                          symmetry=symmetry)
    per_rank = tuple(n.end or 0.0 if n else 0.0 for n in nodes)
    check_result(max(per_rank), f"one {kind} call of {format_bytes(nbytes)} per rank")
    return CollectiveResult(kind, algorithm, mechanism, world_size, nbytes, chunks,
                            max(per_rank), per_rank, sim.net.flows_started,
                            sim.net.rate_updates, described(sim))


def simulate_nccl_call(topo: Topology, kind: str, nbytes: float, world_size: int,
                       symmetry: bool = True) -> CollectiveResult:
    """Time one torch.distributed call of ``kind`` with ``nbytes`` per rank as NCCL makes it
    (its tuner's algorithm, protocol, channels, chunks and latencies, built as nccl_reference
    builds a collective: pkbsim.sim.strategies.nccl_call) over ranks 0..world_size-1, all
    entering at once, each rank's stream node launched first (latency.eager_launch_us, as
    nccl_reference launches it). The time of a small call, such as a metadata collective, on
    the GPU; the host's dispatch (latency.host_collective_us) is not in it."""
    if world_size > topo.total_gpus:
        raise InfeasibleError(f"world size {world_size} needs {world_size} GPUs; topology "
                              f"{topo.name} has {topo.total_gpus}")
    op = CommOp(id="call", kind=kind, bytes_per_rank=nbytes, dtype="bf16", group="world",
                group_size=world_size, group_layout="contiguous", root=0, reduce_op=None,
                pattern="ring" if kind == "send_recv" else None, data_dependent=False,
                imbalance=1.0, repeat=1, chain=False, after=(), host_syncs=0, api="",
                note="")
    members = list(range(world_size))
    spec, choice = nccl_call(topo, fabric_for(topo), op, group_context(op, members, topo),
                             nbytes, world_size)
    sim, nodes = run_call(topo, world_size, replace(spec, label=kind), members,
                          launch_s=topo.latency.eager_kernel_us * US, symmetry=symmetry)
    per_rank = tuple(n.end or 0.0 if n else 0.0 for n in nodes)
    check_result(max(per_rank), f"one NCCL {kind} call of {format_bytes(nbytes)} per rank")
    return CollectiveResult(kind, choice.algorithm, choice.mechanism, world_size, nbytes,
                            choice.chunks, max(per_rank), per_rank, sim.net.flows_started,
                            sim.net.rate_updates, described(sim))
