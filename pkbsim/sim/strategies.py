"""Strategies: how a task's ops become timed nodes on host threads, GPU streams and links.

``nccl_reference`` is what PKB's reference does: one Python thread per rank issues every op
eagerly (host dispatch per kernel launch and per torch.distributed call), one stream runs them
in order, each collective is an NCCL kernel with the algorithm and protocol NCCL's tuner picks,
and every ``.item()``-like host synchronisation drains the stream. ``custom_best`` is the best
kernel the machine allows: one persistent kernel per iteration (one launch, no host
synchronisation), each collective on the (algorithm, mechanism) with the least alpha-beta time
at its size, ops run as soon as their inputs exist (independent work overlaps), and every op is
cut into pieces so that communication overlaps the compute that produces or consumes it.
Per-op overrides (mechanism, algorithm, protocol, chunks, SMs) change either.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pkbsim import symmetry as sym
from pkbsim.bounds import check_int, parse_number, show
from pkbsim.collectives import ALGORITHMS
from pkbsim.collectives.base import Context
from pkbsim.errors import InfeasibleError, UsageError
from pkbsim.limits import SIM_CALLS, SIM_NODES
from pkbsim.placement import fits, group_context, group_members
from pkbsim.roofline import bound_comm_op, bound_compute_op
from pkbsim.sim import nccl
from pkbsim.sim.collective import CallSpec, queues_copies
from pkbsim.sim.engine import (
    Collective,
    Compute,
    Delay,
    Node,
    Simulation,
    comm_sms,
    run_call,
)
from pkbsim.task.schema import CommOp, ComputeOp, TaskInstance
from pkbsim.topology.fabric import Fabric
from pkbsim.topology.schema import Topology
from pkbsim.trace.cost import device_time_s, host_time_s
from pkbsim.trace.format import Collective as TracedCollective
from pkbsim.trace.program import Segment
from pkbsim.trace.store import ChosenProgram
from pkbsim.units import US

STRATEGIES = ("nccl_reference", "custom_best")
OVERRIDE_KEYS = ("mechanism", "algorithm", "protocol", "chunks", "sms")
CHUNK_CHOICES = (1, 2, 4, 8)  # custom_best doubles the pieces while that helps
MAX_INSTANCES = 64  # a compute op repeated more often runs as this many larger instances
SHORTLIST = 4  # custom_best simulates this many best alpha-beta candidates per comm op


@dataclass(frozen=True)
class OpOverride:
    mechanism: str | None = None
    algorithm: str | None = None
    protocol: str | None = None  # nccl_reference: LL, LL128 or Simple
    chunks: int | None = None
    sms: int | None = None  # SMs given to this op's communication


REFERENCE_MODELS = ("auto", "trace", "task")
# Who issues the calls: ``torch`` a Python loop through torch.distributed and eager PyTorch
# (PKB's reference: latency.host_collective_us per collective, host_launch_us per kernel);
# ``nccl-tests`` a C loop (latency.nccl_launch_us per NCCL call or kernel launch)
HOST_MODELS = ("torch", "nccl-tests")


@dataclass(frozen=True)
class Strategy:
    name: str  # nccl_reference | custom_best
    overrides: dict[str, OpOverride] = field(default_factory=dict, hash=False)
    chunks: int | None = None  # custom_best: pieces per op (None: the fastest of CHUNK_CHOICES)
    source: str = "built-in"
    reference: str = "auto"  # nccl_reference: auto (traced when shipped), trace, or task
    # nccl_reference: the traced program it runs (pkbsim.trace), or None for the task file's ops
    program: ChosenProgram | None = field(default=None, hash=False, compare=False)
    host_model: str = "torch"  # HOST_MODELS: what issues each call from the host


@dataclass(frozen=True)
class CommChoice:
    """How one comm op is carried (reported per op)."""

    op: str
    algorithm: str
    mechanism: str
    protocol: str | None
    chunks: int  # pipelined pieces inside the algorithm
    pieces: int  # custom_best: the op cut into this many calls to overlap with compute
    sms: int
    estimate_us: float | None  # NCCL's own alpha-beta estimate (nccl_reference)


CUSTOM_CHUNK_BYTES = 64 * 1024
# torch.distributed calls that write their input (all_reduce(t), broadcast(t), reduce(t)): with
# one rank NCCL has nothing to do; the others copy their input to their output
IN_PLACE_KINDS = ("all_reduce", "broadcast", "reduce")
# traced collectives the simulator runs as NCCL calls (send/recv, barrier: the host cost only)
TRACED_KINDS = {"all_reduce": "all_reduce", "all_gather": "all_gather",
                "reduce_scatter": "reduce_scatter", "all_to_all": "all_to_all",
                "broadcast": "broadcast", "reduce": "reduce", "gather": "gather",
                "scatter": "scatter",
                # a traced send is one half of a ring exchange (batch_isend_irecv, a halo); its
                # recv is the other half, so the recv costs the host only
                "send": "send_recv"}  # custom kernels pipeline at a finer grain than NCCL's steps


def nccl_call(topo: Topology, fabric: Fabric, op: CommOp, ctx: Context, nbytes: float,
              world_size: int, ov: OpOverride | None = None) -> tuple[CallSpec, CommChoice]:
    """The call NCCL makes for ``op`` with ``nbytes`` per rank (its tuner's algorithm,
    protocol, channels, chunks and latencies: pkbsim.sim.nccl.choose), with ``ov`` applied;
    as nccl_reference builds it."""
    ov = ov or OpOverride()
    if ov.algorithm and ov.algorithm not in ALGORITHMS:
        raise UsageError(f"op {op.id}: unknown algorithm {ov.algorithm!r}")
    if ov.protocol and ov.protocol not in nccl.PROTOCOLS:
        raise UsageError(f"op {op.id}: unknown protocol {ov.protocol!r} "
                         f"(expected {', '.join(nccl.PROTOCOLS)})")
    choice = nccl.choose(op, nbytes, ctx, world_size, fabric, ov.algorithm, ov.protocol)
    name = ov.mechanism or choice.mechanism
    if name not in topo.mechanisms:
        raise UsageError(f"op {op.id}: topology {topo.name} has no mechanism {name!r}")
    mech = topo.mechanisms[name]
    alg = ALGORITHMS[choice.algorithm]
    if not alg.applies(op.kind, ctx):
        raise UsageError(f"op {op.id}: algorithm {alg.name} cannot carry {op.kind}")
    if not fits(alg, mech, op.kind):
        raise UsageError(f"op {op.id}: mechanism {mech.name} cannot carry {alg.name} "
                         f"{op.kind} on {topo.name}")
    chunks = ov.chunks or choice.chunks
    # NCCL runs one block per channel: the call holds (and moves data with) that many SMs
    sms = comm_sms(mech, ov.sms if ov.sms is not None or ov.mechanism else choice.channels)
    return (CallSpec(alg, mech, op.kind, nbytes, ctx, chunks, choice.start_latency_s,
                     choice.step_latency_s, choice.net_latency_s, sms, op.id,
                     choice.flow_cap_Bps),
            CommChoice(op.id, alg.name, mech.name, choice.protocol, chunks, 1, sms,
                       round(choice.estimate_s / US, 6)))


class Builder:
    """Builds the node graph of ``iterations`` back-to-back iterations of one task."""

    def __init__(self, sim: Simulation, inst: TaskInstance, strategy: Strategy,
                 pieces: int = 1, classes: sym.Classes | None = None,
                 known: Builder | None = None) -> None:
        self.sim = sim
        self.inst = inst
        self.topo = sim.topo
        self.strategy = strategy
        self.pieces = pieces
        self.w = inst.world_size
        # the ranks simulated: one per class of equivalent ranks (pkbsim.symmetry)
        self.classes = classes or sym.full(self.w, "symmetry turned off")
        self.ranks = self.classes.ranks
        self.choices: dict[str, CommChoice] = {}
        self.ends: list[list[Node]] = []  # [iteration][rank] end markers
        self._groups: dict[str, list[list[int]]] = {}
        self._specs: dict[tuple[str, int, int], CallSpec] = {}
        if known is not None:  # built again with coarser classes: the calls chosen stay
            self._specs, self.choices = dict(known._specs), dict(known.choices)
        ops = {op.id: op for op in inst.ops}
        for key, ov in strategy.overrides.items():
            if key not in ops:
                raise UsageError(f"override for unknown op {key!r}; ops: {', '.join(ops)}")
            if isinstance(ops[key], ComputeOp) and any(vars(ov).values()):
                raise UsageError(f"override for op {key!r}: a compute op; mechanism, "
                                 "algorithm, protocol, chunks and sms set communication ops")

    # ------------------------------------------------------------ shared

    def host_call_s(self) -> float:
        """Host cost of issuing one collective under the strategy's host model."""
        lat = self.topo.latency
        return (lat.nccl_launch_us if self.strategy.host_model == "nccl-tests"
                else lat.host_collective_us) * US

    def host_kernel_s(self) -> float:
        """Host cost of launching one kernel under the strategy's host model."""
        lat = self.topo.latency
        return (lat.nccl_launch_us if self.strategy.host_model == "nccl-tests"
                else lat.host_launch_us) * US

    def groups(self, op: CommOp) -> list[list[int]]:
        if op.id not in self._groups:
            self._groups[op.id] = group_members(op, self.w)
        return self._groups[op.id]

    def spec(self, op: CommOp, rep: int, nbytes: float) -> CallSpec:
        """The call for repeat ``rep`` (rotating roots differ), bytes ``nbytes`` per rank."""
        key = self._key(op, rep, nbytes)
        found = self._specs.get(key)
        if found is None:
            found = self._specs[key] = self._make_spec(op, key[1], nbytes)
        return found

    def chosen(self, op: CommOp, rep: int, nbytes: float) -> CallSpec | None:
        """The call already chosen for repeat ``rep``, if any (``spec`` chooses it)."""
        return self._specs.get(self._key(op, rep, nbytes))

    @staticmethod
    def _key(op: CommOp, rep: int, nbytes: float) -> tuple[str, int, int]:
        root = (op.root + rep) % op.group_size if op.rotate_root else op.root
        return op.id, root, int(nbytes)

    def _make_spec(self, op: CommOp, root: int, nbytes: float) -> CallSpec:
        ctx = replace(group_context(op, self.groups(op)[0], self.topo), root=root)
        ov = self.strategy.overrides.get(op.id, OpOverride())
        if self.strategy.name == "nccl_reference":
            return self._nccl_spec(op, ctx, nbytes, ov)
        return self._custom_spec(op, ctx, nbytes, ov)

    def _nccl_spec(self, op: CommOp, ctx: Context, nbytes: float, ov: OpOverride) -> CallSpec:
        spec, choice = self.as_nccl(op, ctx, nbytes, ov)
        self.choices[op.id] = choice
        return spec

    def as_nccl(self, op: CommOp, ctx: Context, nbytes: float, ov: OpOverride
                   ) -> tuple[CallSpec, CommChoice]:
        """The call NCCL would make for ``op`` (its tuner's algorithm, protocol, channels,
        chunks and latencies), with ``ov`` applied."""
        return nccl_call(self.topo, self.sim.fabric, op, ctx, nbytes, self.w, ov)

    def shortlist(self, op: CommOp, ctx: Context, nbytes: float, ov: OpOverride
                  ) -> list[CallSpec]:
        """The calls custom_best simulates alone to choose how to carry ``op`` with
        ``nbytes`` per rank: the SHORTLIST best (algorithm, mechanism) by alpha-beta time that
        ``ov`` allows (NCCL's call is tried beside them)."""
        topo = self.topo
        bound = bound_comm_op(replace(op, bytes_per_rank=nbytes, repeat=1, imbalance=1.0),
                              self.inst, self.sim.fabric)
        cands = [c for c in bound.candidates
                 if (ov.mechanism is None or c.mechanism == ov.mechanism)
                 and (ov.algorithm is None or c.algorithm == ov.algorithm)]
        if not cands:
            what = " and ".join(f"{k} {v}" for k, v in (("mechanism", ov.mechanism),
                                                         ("algorithm", ov.algorithm)) if v)
            options = sorted({f"{c.algorithm}/{c.mechanism}" for c in bound.candidates})
            raise UsageError(f"op {op.id}: no way to carry {op.kind} with {what} on "
                             f"{topo.name} (possible: {', '.join(options)})")
        net = topo.scale_out.latency_us * US if topo.scale_out else 0.0
        specs = []
        for cand in sorted(cands, key=lambda c: (c.t_total_s, c.t_bw_s))[:SHORTLIST]:
            mech = topo.mechanisms[cand.mechanism]
            alg = ALGORITHMS[cand.algorithm]
            assert fits(alg, mech, op.kind)
            chunks = ov.chunks or alg.pipeline_chunks(op.kind, nbytes, ctx.n,
                                                   CUSTOM_CHUNK_BYTES)
            sms = comm_sms(mech, ov.sms)
            if mech.traits.uses_sms and sms < 1:
                raise UsageError(f"op {op.id}: {mech.name} moves data with SMs; give it >= 1")
            # one rank moves nothing and waits for no one: no start handshake either
            start = mech.latency_s if ctx.n > 1 else 0.0
            specs.append(CallSpec(alg, mech, op.kind, nbytes, ctx, chunks, start,
                                  mech.step_latency_s, net, sms, op.id))
        return specs

    def candidate_calls(self, op: CommOp, nbytes: float) -> list[CallSpec]:
        """The calls custom_best may choose for ``op`` (it simulates them alone to choose: the
        shortlist and NCCL's call), without simulating any (pkbsim.sim.memory counts them)."""
        ctx = group_context(op, self.groups(op)[0], self.topo)
        ov = self.strategy.overrides.get(op.id, OpOverride())
        specs = self.shortlist(op, ctx, nbytes, ov)
        if ctx.n > 1 and not any(vars(ov).values()):
            specs.append(self.as_nccl(op, ctx, nbytes, ov)[0])
        return specs

    def _custom_spec(self, op: CommOp, ctx: Context, nbytes: float, ov: OpOverride
                     ) -> CallSpec:
        members = self.groups(op)[0]
        best_spec: CallSpec | None = None
        best_time = float("inf")
        protocol: str | None = None
        # the alpha-beta ranking shortlists; a standalone simulation of one call decides, as it
        # sees what alpha-beta does not (pipelining of phases, chunking, shared ports)
        for spec in self.shortlist(op, ctx, nbytes, ov):
            t = self._standalone(spec, members)
            if t < best_time:
                best_spec, best_time = spec, t
        if ctx.n > 1 and not any(vars(ov).values()):
            # a custom kernel can always do what the reference's NCCL call does
            nccl_call, nccl_choice = self.as_nccl(op, ctx, nbytes, ov)
            if self._standalone(nccl_call, members) < best_time:
                best_spec, protocol = nccl_call, nccl_choice.protocol
        if best_spec is None:  # every candidate's time is infinite: a link with no bandwidth
            raise InfeasibleError(f"op {op.id}: no way to carry {op.kind} on {self.topo.name} "
                                  "finishes (a link or mechanism without bandwidth?)")
        self.choices[op.id] = CommChoice(op.id, best_spec.algorithm.name,
                                         best_spec.mechanism.name, protocol, best_spec.chunks,
                                         self.pieces_of(op), best_spec.comm_sms, None)
        return best_spec

    def _standalone(self, spec: CallSpec, members: list[int]) -> float:
        """One call alone on an idle machine (memoised per topology: the same call recurs
        across repeats, pieces and strategies)."""
        key = (spec, tuple(members), self.w)
        cache = self.sim.fabric.call_times
        if key not in cache:
            cache[key] = run_call(self.topo, self.w, spec, members, self.sim.net.budget)[0].env.now
        return cache[key]

    def pieces_of(self, op: CommOp | ComputeOp) -> int:
        ov = self.strategy.overrides.get(op.id)
        if isinstance(op, CommOp) and ov is not None and ov.chunks:
            return 1  # an explicit chunks override sets the algorithm's pipelining instead
        return self.pieces

    def collective_nodes(self, op: CommOp, rep: int, nbytes: float,
                         deps: Mapping[int, list[Node | None]],
                         it: int, launch_s: float) -> dict[int, Node]:
        """One call of ``op`` in every group: one node per rank."""
        spec = self.spec(op, rep, nbytes)
        classes = self.classes
        if classes.symmetric:
            needs = sym.call_steps(classes, spec.algorithm, spec.kind, spec.ctx,
                                   self.groups(op), queues_copies(spec, self.topo))
            if needs is not None:
                raise sym.Asymmetric(*needs[:2], f"op {op.id}: {needs[2]}")
        out: dict[int, Node] = {}
        for run in self.sim.collective_call(spec, self.groups(op)):
            for g, r in enumerate(run.members):
                if r in deps:
                    out[r] = self.sim.node(r, "stream0", op.id, it, Collective(run, g),
                                           deps[r], launch_s)
        return out

    def one_rank_nodes(self, op: CommOp, nbytes: float, deps: Mapping[int, list[Node | None]],
                       it: int) -> dict[int, Node]:
        """An NCCL call in a group of one rank (NCCL's ncclLaunchOneRank): out of place, a
        device copy of the buffer (cudaMemcpyAsync); in place, nothing on the GPU."""
        if op.kind in IN_PLACE_KINDS or nbytes <= 0:
            return {}
        launch = self.topo.latency.eager_kernel_us * US
        return {r: self.sim.node(r, "stream0", op.id, it, Compute(0.0, 2 * nbytes), deps[r],
                                 launch) for r in self.ranks}

    # ------------------------------------------------------------ strategies

    def nodes_needed(self, iterations: int) -> int:
        """An upper bound on the nodes ``build`` makes, known before making any."""
        per_rank = 1  # the iteration's end
        if self.strategy.name == "nccl_reference" and self.strategy.program is not None:
            per_rank += 1 + sum(seg.times * (6 if seg.end == "collective" else 5)
                            for seg in self.strategy.program.program.segments)
            return iterations * len(self.ranks) * per_rank
        for op in self.inst.ops:
            if self.strategy.name == "nccl_reference":
                if isinstance(op, CommOp):
                    per_rank += op.repeat * (2 + op.host_syncs)
                else:
                    per_rank += 4 + op.repeat * op.host_syncs
            else:
                per_rank += self._count(op) * self.pieces_of(op)
        if self.strategy.name != "nccl_reference":
            per_rank += 3  # the fused kernel's launch, start and end
        return iterations * len(self.ranks) * per_rank

    def check_nodes(self, iterations: int) -> None:
        """Refuse, before any is made, more nodes than SIM_NODES."""
        SIM_NODES.check(self.nodes_needed(iterations), f"simulating task {self.inst.spec.key} "
                        f"at W = {self.w}", InfeasibleError)

    def build(self, iterations: int) -> None:
        self.check_nodes(iterations)
        host_prev: list[Node | None] = [None] * self.w
        gpu_prev: list[Node | None] = [None] * self.w
        for it in range(iterations):
            if self.strategy.name == "nccl_reference" and self.strategy.program is not None:
                self._program_iteration(it, host_prev, gpu_prev)
            elif self.strategy.name == "nccl_reference":
                self._reference_iteration(it, host_prev, gpu_prev)
            else:
                self._custom_iteration(it, host_prev, gpu_prev)
            mine = {r: self.sim.node(r, "stream0", "iteration_end", it, None,
                                     [host_prev[r], gpu_prev[r]]) for r in self.ranks}
            ends = [mine[self.classes.rep(r)] for r in range(self.w)]  # images: their rep's
            self.ends.append(ends)
            gpu_prev[:] = ends

    def _reference_iteration(self, it: int, host: list[Node | None],
                             gpu: list[Node | None]) -> None:
        sim, lat = self.sim, self.topo.latency
        # eager PyTorch: each kernel launched from Python; one that moves data also ramps up
        launch = lat.eager_kernel_us * US
        working = (lat.eager_kernel_us + lat.kernel_ramp_us) * US
        for op in self.inst.ops:
            if isinstance(op, CommOp):
                for rep in range(op.repeat):
                    issued = {r: sim.node(r, "host", op.id, it,
                                          Delay(self.host_call_s(), "collective_call"),
                                          [host[r]]) for r in self.ranks}
                    deps: dict[int, list[Node | None]] = {r: [issued[r], gpu[r]]
                                                          for r in self.ranks}
                    nbytes = op.bytes_per_rank * op.imbalance
                    nodes = (self.one_rank_nodes(op, nbytes, deps, it) if op.group_size == 1
                             else self.collective_nodes(op, rep, nbytes, deps, it, launch))
                    for r in self.ranks:
                        host[r], gpu[r] = issued[r], nodes.get(r, gpu[r])
                        self._host_syncs(op.host_syncs, op.id, r, it, host, gpu)
                continue
            if op.repeat == 0:  # the reference skips it at this size (e.g. no padding needed)
                continue
            cb = bound_compute_op(op, self.topo)  # all repeats, busiest rank
            kernels = max(op.repeat * op.launches, 1)
            for r in self.ranks:
                if not op.runs_on(r):
                    continue
                first = sim.node(r, "host", op.id, it, Delay(self.host_kernel_s()), [host[r]])
                work = sim.node(r, "stream0", op.id, it, Compute(cb.t_comp_s, cb.op.hbm_bytes
                                                                 * op.repeat * op.imbalance),
                                [first, gpu[r]], working * kernels)
                host[r], gpu[r] = first, work
                if kernels > 1:  # the rest of the launches: the GPU cannot finish before them
                    rest = sim.node(r, "host", op.id, it,
                                    Delay(lat.host_launch_us * US * (kernels - 1)), [first])
                    gpu[r] = sim.node(r, "stream0", op.id, it, None, [work, rest], launch)
                    host[r] = rest
                for _ in range(op.repeat):
                    self._host_syncs(op.host_syncs, op.id, r, it, host, gpu)

    def _program_iteration(self, it: int, host: list[Node | None],
                           gpu: list[Node | None]) -> None:
        """The traced program: per segment, the host issues its operators (each class at its
        cost) while the stream runs its kernels, then the boundary: a collective (its host
        cost, then the NCCL call) or a sync (the host waits for the stream)."""
        assert self.strategy.program is not None
        sim, lat, topo = self.sim, self.topo.latency, self.topo
        launch = lat.eager_kernel_us * US
        if lat.host_call_us > 0:  # the call itself: Python, the caller's timing loop
            for r in self.ranks:
                host[r] = sim.node(r, "host", "call", it, Delay(lat.host_call_us * US), [host[r]])
        for index, seg in enumerate(self.strategy.program.program.segments):
            name = f"seg{index}"
            t_host, t_dev = host_time_s(seg, topo), device_time_s(seg, topo)
            nbytes = sum(k.bytes * k.count for k in seg.kernels)
            kernels = seg.kernel_count
            ops = max(1.0, sum(n for _, n in seg.host))
            for _ in range(seg.times):
                for r in self.ranks:
                    if kernels:
                        first = sim.node(r, "host", name, it, Delay(t_host / ops), [host[r]])
                        work = sim.node(r, "stream0", name, it, Compute(t_dev, nbytes),
                                        [first, gpu[r]], launch * kernels)
                        rest = sim.node(r, "host", name, it, Delay(t_host * (1 - 1 / ops)),
                                        [first])
                        gpu[r] = sim.node(r, "stream0", name, it, None, [work, rest], launch)
                        host[r] = rest
                    elif t_host > 0:
                        host[r] = sim.node(r, "host", name, it, Delay(t_host), [host[r]])
                if seg.end == "sync":
                    for r in self.ranks:
                        self._host_syncs(1, name, r, it, host, gpu)
                elif seg.end == "collective" and seg.collective is not None:
                    self._traced_collective(seg, name, it, host, gpu)

    def _traced_collective(self, seg: Segment, name: str, it: int, host: list[Node | None],
                           gpu: list[Node | None]) -> None:
        coll = seg.collective
        assert coll is not None
        lat = self.topo.latency
        issued = {r: self.sim.node(r, "host", name, it,
                                   Delay(lat.host_collective_us * US, "collective_call"),
                                   [host[r]]) for r in self.ranks}
        op = self.comm_op(coll, name)
        if op is None:  # a kind NCCL does not run as one call: the host cost only
            for r in self.ranks:
                host[r] = issued[r]
            return
        deps: dict[int, list[Node | None]] = {r: [issued[r], gpu[r]] for r in self.ranks}
        nodes = (self.one_rank_nodes(op, op.bytes_per_rank, deps, it) if op.group_size == 1
                 else self.collective_nodes(op, 0, op.bytes_per_rank, deps, it,
                                            lat.eager_kernel_us * US))
        for r in self.ranks:
            host[r] = issued[r]
            gpu[r] = nodes.get(r, gpu[r])

    def comm_op(self, coll: TracedCollective, name: str) -> CommOp | None:
        """The traced collective as a comm op at this world size (its group scaled with W when
        the trace's group was the whole world)."""
        assert self.strategy.program is not None
        traced_w = self.strategy.program.point.world_size
        size = self.w if coll.group_size == traced_w else coll.group_size
        kind = TRACED_KINDS.get(coll.name)
        if size < 1 or kind is None or self.w % size or coll.bytes <= 0:
            return None
        return CommOp(id=f"{name}:{coll.name}", kind=kind, bytes_per_rank=float(coll.bytes),
                      dtype="bf16", group="world" if size == self.w else f"traced{size}",
                      group_size=size, group_layout="contiguous", root=0,
                      reduce_op="sum" if kind in ("all_reduce", "reduce_scatter", "reduce")
                      else None, pattern="ring" if kind == "send_recv" else None,
                      data_dependent=False, imbalance=1.0, repeat=1,
                      chain=False, after=(), host_syncs=0, api=coll.name, note="traced")

    def _host_syncs(self, count: int, name: str, r: int, it: int, host: list[Node | None],
                    gpu: list[Node | None]) -> None:
        for _ in range(count):
            host[r] = self.sim.node(r, "host", f"{name}:sync", it,
                                    Delay(self.topo.latency.host_sync_us * US), [host[r], gpu[r]])

    def _custom_iteration(self, it: int, host: list[Node | None],
                          gpu: list[Node | None]) -> None:
        sim, lat = self.sim, self.topo.latency
        if not any(op.repeat > 0 and (isinstance(op, ComputeOp) or op.group_size > 1)
                   for op in self.inst.ops):
            return  # nothing to do (every op skipped, or calls in groups of one rank): no launch
        kernel = {}
        for r in self.ranks:
            host[r] = sim.node(r, "host", "fused_kernel", it, Delay(self.host_kernel_s()),
                               [host[r]])
            kernel[r] = sim.node(r, "stream0", "fused_kernel", it, None, [host[r], gpu[r]],
                                 (lat.eager_kernel_us + lat.kernel_ramp_us) * US)
        pieces_done: dict[str, list[dict[int, list[Node]]]] = {}
        leaves: dict[int, list[Node]] = {r: [] for r in self.ranks}
        for op in self.inst.ops:
            count = self._count(op)
            k = self.pieces_of(op)
            instances: list[dict[int, list[Node]]] = []
            for i in range(count):
                per_rank: dict[int, list[Node]] = {r: [] for r in self.ranks}
                for j in range(k):
                    deps = {r: self._custom_deps(op, i, j, k, r, kernel[r], per_rank[r],
                                                 instances, pieces_done)
                            for r in self.ranks}
                    if isinstance(op, CommOp):
                        nodes = self.collective_nodes(op, i, op.bytes_per_rank * op.imbalance / k,
                                                      deps, it, 0.0)
                    else:
                        nodes = self._compute_nodes(op, count, k, deps, it)
                    for r, node in nodes.items():
                        per_rank[r].append(node)
                instances.append(per_rank)
            pieces_done[op.id] = instances
        for instances in pieces_done.values():
            for inst in instances:
                for r, chain in inst.items():
                    if chain:
                        leaves[r].append(chain[-1])
        for r in self.ranks:
            gpu[r] = sim.node(r, "stream0", "fused_kernel_end", it, None,
                              [kernel[r], *leaves[r]])

    def _custom_deps(self, op: CommOp | ComputeOp, i: int, j: int, k: int, r: int, kernel: Node,
                     own: list[Node], instances: list[dict[int, list[Node]]],
                     pieces_done: dict[str, list[dict[int, list[Node]]]]) -> list[Node | None]:
        deps: list[Node | None] = [kernel]
        if own:
            deps.append(own[-1])  # pieces of one instance run in order
        elif op.chain and i > 0 and instances[i - 1][r]:
            deps.append(instances[i - 1][r][-1])
        for dep_id in op.after:
            dep = pieces_done.get(dep_id)
            if not dep:
                continue
            # the same number of instances pairs them (instance i waits for instance i);
            # otherwise every instance of the producer must be done
            for inst in ([dep[i]] if len(dep) == self._count(op) else dep):
                nodes = inst.get(r) or []
                if nodes:
                    deps.append(nodes[min(len(nodes) - 1, math.ceil((j + 1) * len(nodes) / k) - 1)])
                elif not isinstance(op, CommOp):
                    # the producer does not run on this rank: wait for it where it ran (a call
                    # needs no such wait: its sends already wait for each peer to enter it)
                    deps.extend(ns[-1] for ns in inst.values() if ns)
        return deps

    @staticmethod
    def _count(op: CommOp | ComputeOp) -> int:
        return op.repeat if isinstance(op, CommOp) else min(op.repeat, MAX_INSTANCES)

    def _compute_nodes(self, op: ComputeOp, count: int, k: int,
                       deps: Mapping[int, list[Node | None]],
                       it: int) -> dict[int, Node]:
        cb = bound_compute_op(op, self.topo)
        share = 1.0 / (count * k)
        out = {}
        for r in self.ranks:
            if op.runs_on(r):
                out[r] = self.sim.node(r, "stream0", op.id, it,
                                       Compute(cb.t_comp_s * share,
                                               op.hbm_bytes * op.repeat * op.imbalance * share),
                                       deps[r], 0.0)
        return out


def standalone_calls(inst: TaskInstance, strategy: Strategy) -> int:
    """At most how many calls one run of ``strategy`` simulates alone to choose how each op
    is carried: custom_best, for each comm op and each root its repeats rotate through, the
    SHORTLIST best alpha-beta candidates (nccl_reference: none, NCCL's tuner chooses)."""
    if strategy.name != "custom_best":
        return 0
    return sum((min(op.repeat, op.group_size) if op.rotate_root else min(op.repeat, 1))
               * SHORTLIST for op in inst.ops if isinstance(op, CommOp))


def check_standalone_calls(inst: TaskInstance, strategy: Strategy, runs: int = 1) -> None:
    """Refuse the calls alone of ``runs`` runs (custom_best tries a piece count per run) over
    SIM_CALLS, before the last of those runs starts."""
    SIM_CALLS.check(standalone_calls(inst, strategy) * runs, f"{strategy.name} for task "
                    f"{inst.spec.key} at W = {inst.world_size}"
                    + (f", {runs} piece counts tried" if runs > 1 else ""), InfeasibleError)


def parse_overrides(items: Mapping[str, Mapping[str, Any]], file: str = "--override"
                    ) -> dict[str, OpOverride]:
    """{op id: {key: value}} from a strategy file or ``--override OP.KEY=VALUE``."""
    out: dict[str, OpOverride] = {}
    for op_id, fields in items.items():
        values: dict[str, Any] = {}
        for key, value in fields.items():
            if key not in OVERRIDE_KEYS:
                raise UsageError(f"{file}: {op_id}.{key}: unknown key; expected one of "
                                 + ", ".join(OVERRIDE_KEYS))
            if key in ("chunks", "sms"):
                number = value
                if isinstance(value, str):
                    with contextlib.suppress(UsageError):
                        number = parse_number(value)
                if isinstance(number, bool) or not isinstance(number, int):
                    raise UsageError(f"expected an integer, got {show(number)}", file=file,
                                     field=f"{op_id}.{key}")
                values[key] = check_int(number, key, source=file, field=f"{op_id}.{key}")
            else:
                values[key] = str(value)
        out[str(op_id)] = OpOverride(**values)
    return out
