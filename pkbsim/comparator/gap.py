"""Gap decomposition: a measured time as the roofline plus named excesses and a residual.

``decompose(inst, topo, measured_s, inspection)`` splits ``gap = measured - t_roof`` into

    gap = launch_sync_latency + mechanism_inefficiency + excess_bytes + missing_overlap
          + host_sync + unfused_pytorch + residual

Each named term is a closed form over the topology's numbers, switched on by the inspection's
evidence (``pkbsim.inspection.vocab``: ``mechanisms``, ``nccl_on_hot_path`` and one bool per
flag). The residual is what the named terms leave: never hidden, possibly negative. Without an
inspection no term has evidence and the whole gap is residual.

Inspection fields read (a plain mapping; missing flags are false): ``mechanisms`` (list),
``nccl_on_hot_path`` (list of torch.distributed call names; ``dist.`` prefixes and anything
after the name are dropped; a name ending in ``(metadata)`` is a metadata call), every FLAGS name
(bool), optionally ``call_sites`` (the inspection's: each hot ``nccl_metadata`` site's
``call``, ``line`` and, where bounded, ``elements`` and ``dtype``), ``custom_kernels`` (int,
kernels launched per call), ``host_syncs`` (int, synchronisations per call), ``evidence``
(name -> line numbers or (line, snippet) pairs, quoted in the evidence texts) and ``program``
(a ``pkbsim.trace.program.Program``: the traced reference program the implementation runs). A
mapping with a non-empty ``error`` (a file inspection could not read) counts as no inspection.
:func:`reference_inspection` builds the mapping that describes PKB's reference from the model
``pkbsim.comparator.reference.reference_model`` chose: its traced program (the collectives it
calls, its syncs, the program itself) or, without one, the task file's ops.

Symbols (topology): ``L`` latency.kernel_launch_us, ``L_e`` its eager_launch_us (default L),
``H_l`` host_launch_us, ``H_c`` host_collective_us, ``H_s`` host_sync_us, ``N_c``
nccl_call_us, ``sigma`` scale_up.signal_latency_us, ``B_hbm`` gpu.hbm_Bps. Per comm op ``o``
(roofline, docs/metrics.md sections 1-5): ``r_o`` repeat, ``m_o`` bytes_per_rank x imbalance,
candidates ``(a, k)`` of algorithm and mechanism with ``t_bw(a, k)`` (busiest link, all
repeats) and ``t_ab(a, k) = r_o (alpha_k + steps_a beta_k) + t_bw(a, k)`` (alpha-beta at size);
``t*_o = min t_ab`` over all candidates (``best_at_size``).

**Carrier of each comm op.** Vocabulary mechanisms map to the topology's: sm_peer_ldst and
nvshmem -> sm_ldst, tma and tk_pgl -> tma, copy_engine, nvls_multimem as named. An op goes
through NCCL when nccl_payload is listed and a hot-path call matches its kind or its ``api``
(all_gather_into_tensor -> all_gather, ...) or no listed custom mechanism can carry it;
otherwise it goes on the listed custom mechanism ``k`` with the least ``t_ab`` (with the
one_shot flag on an all-reduce: the best one that can carry one_shot). Otherwise its carrier is
unknown and it adds to no term (the residual says so).

**Terms.** Each has a GPU part ``g`` (on the stream) and a host part ``h`` (Python dispatch):

- ``launch_sync_latency``: g = (K - 1)+ L + [device_barrier] sigma max(sum_custom r_o, 1)
  + [barrier] N_c + [per_call_rendezvous] 2 N_c + sum_meta t_m;
  h = K H_l + P H_c + ([barrier] + 2 [per_call_rendezvous] + n_meta) H_c, where [barrier] is
  host_barrier_per_call or a barrier call on the hot path, and t_m a metadata call's latency:
  the simulator's time of that collective at its size (``pkbsim.sim.simulate_nccl_call``:
  NCCL's choice, its stream's launch included) where the inspection bounded its size (a call
  site's ``elements`` and ``dtype``), else N_c.
  K = custom kernels per call (``custom_kernels``, at least 1 when fused_comm_compute is set or
  a mechanism other than nccl_payload and copy_engine is listed: a library kernel such as
  torch's symmetric-memory all-reduce counts); the roofline's floor already holds one launch
  and each op's fewest sync steps. A device barrier is one extra sync step (flag round trip) per
  custom-carried op instance; a rendezvous is a handle exchange plus a barrier, two small
  NCCL calls (IPC opening is not modelled: a lower bound). P = sum r_o over NCCL-carried ops;
  n_meta = the hot calls marked ``(metadata)`` (one per hot ``nccl_metadata`` call site when
  ``call_sites`` are given: a counts vector, a flag, a scalar norm, an object collective) that
  are neither barriers nor queries, and the unmarked hot-path calls that are neither barriers,
  queries (get_rank, ...) nor of the kind of one of the task's comm ops. A metadata call never
  makes NCCL an op's carrier: only unmarked calls name the NCCL-carried kinds.
  With a ``program``: P = the program's collective calls, n_meta = 0 (each traced call is
  counted in P).
- ``mechanism_inefficiency``: g = sum over ops with a known carrier of max(0, t_c(o) - t*_o).
  Custom: t_c = min_a t_ab(a, k)
  (the best algorithm on the chosen mechanism, so the algorithm's bytes stay out); NCCL:
  t_c = r_o x NCCL's tuner estimate for the call (pkbsim.sim.nccl.choose: its algorithm,
  protocol, base and hop latencies).
- ``excess_bytes`` (one_shot flag, all-reduce on a custom mechanism): g = t_bw(one_shot, k) -
  min_a t_bw(a, k), the extra bytes on the busiest port at k's rate. On an NVSwitch this is
  ((n-1) - 2(n-1)/n) m_o r_o / (eta_k B) = (n-1)(n-2)/n m_o r_o / (eta_k B).
- ``missing_overlap`` (comm and compute ops, neither overlap_attempt nor fused_comm_compute):
  g = max(0, t_comm + max(t_mem, t_comp) - t_roof): the serialized sum against the max.
- ``host_sync`` (host_sync flag): S H_s, S = ``host_syncs``, else the number of evidence
  lines for host_sync, else 1.
- ``unfused_pytorch`` (compute ops, not fused_comm_compute): U = sum over compute ops of
  max(repeat x launches, 1) (the reference's eager kernels), less the (K - 1)+ extra custom
  kernels assumed to replace some: U' = max(0, U - (K - 1)+); g = U' L_e + 2 sum_o m_o r_o /
  B_hbm (each comm buffer written to HBM by one kernel and read back by another);
  h = U' H_l. With a ``program`` (its kernels and operators are PyTorch's own): U = its
  kernels, D = their device time (pkbsim.trace.cost, launches excluded), H = the host time of
  issuing its operators (each class at its cost) plus ``host_call_us``;
  g = U' L_e + (U'/U) max(0, D - max(t_mem, t_comp)), h = (U'/U) H. Then T_g is the traced
  stream's work (NCCL calls, kernels, launches) and T_h its host's, as the simulator runs it.

**Combination.** GPU work T_g = t_roof + sum g; host dispatch T_h = sum h. PKB times iterations
back to back, so the host runs ahead and only V = max(0, T_h - T_g) of its dispatch shows; the
host terms share V in proportion to their h. Modelled time
``T_model = max(T_g, T_h) + S H_s``, and term value e = g + h V / T_h (host_sync: S H_s), so
sum e = T_model - t_roof. If sum e exceeds a positive gap, every e is scaled by gap / sum e
(``Gap.scale``, and a note says so); if the gap is not positive they are all 0 and the residual
is the gap. residual = gap - sum of the (scaled) named terms. Named terms are ranked by size;
the residual comes last. share = e / gap (None when the gap is 0).

What stays in the residual by construction: T_g starts from t_roof, not from the best
carriers' own latency at size (t*_o less its bandwidth time), so a latency-bound kernel the
terms explain fully still leaves about sum_o (t*_o - t_bw(best_o)) there; a host sync also
stops the host from running ahead of the GPU, which T_model (max, then + S H_s) ignores.
Against the simulator, T_model of :func:`reference_inspection` is the predicted time of the same
reference model within 0.77x-1.15x on all 87 tasks at PKB's sizes on dgx-h100 (median 1.00;
the 82 traced ones 0.77x-1.00x, equal where the host binds and never syncs;
benchmarks/gap_model_vs_simulator.py).

**Predicted time after a fix** (``pkbsim.sim``): the inspected implementation as the simulator
can express it is C: ``nccl_reference`` when it launches no custom kernel and every carried op
is NCCL's (host syncs kept only with the host_sync flag), else ``custom_best`` with each op's
mechanism pinned to its carrier (NCCL ops to NCCL's algorithm and protocol mechanism),
algorithm one_shot where used, and pieces = 1 unless overlap_attempt or fused_comm_compute
(``Gap.predicted_candidate_us``). A term's fix changes one thing: launch_sync_latency and
unfused_pytorch -> custom_best with C's pins (one fused launch); mechanism_inefficiency -> C
without mechanism pins; excess_bytes -> C without one_shot; missing_overlap -> C with pieces
searched; host_sync -> C without host syncs; residual -> plain custom_best. grid_capped and
uncoalesced_peer are reported with the residual; they have no closed form. Every
``nccl_reference`` run (``Gap.predicted_nccl_reference_us``, C, C without host syncs) is of the
one reference model ``decompose`` is given (``Gap.reference_model`` names it): its traced
program, whose sync boundaries a fix removes, or the task file's ops, whose ``host_syncs`` it
zeroes; so PKB's reference's C is its predicted time. ``custom_best`` runs the task file's ops
(a custom kernel does the task's work, not PyTorch's operators).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pkbsim.comparator.reference import ReferenceModel, reference_model
from pkbsim.errors import PkbsimError, UsageError
from pkbsim.inspection.profile import ITEMSIZE
from pkbsim.inspection.vocab import FLAGS, MECHANISMS
from pkbsim.placement import fabric_for, group_context, group_members
from pkbsim.roofline import Candidate, CommBound, Roofline
from pkbsim.roofline import roofline as compute_roofline
from pkbsim.sim import SimResult, Strategy, nccl, simulate, simulate_nccl_call
from pkbsim.sim.strategies import OpOverride
from pkbsim.task.schema import CommOp, ComputeOp, TaskInstance
from pkbsim.topology.schema import Topology
from pkbsim.trace.cost import device_time_s, host_time_s
from pkbsim.trace.program import Program
from pkbsim.units import US, format_bytes

TERMS = ("launch_sync_latency", "mechanism_inefficiency", "excess_bytes", "missing_overlap",
         "host_sync", "unfused_pytorch", "residual")
NCCL = "nccl_payload"
TOPOLOGY_MECHANISM = {"copy_engine": "copy_engine", "sm_peer_ldst": "sm_ldst", "tma": "tma",
                      "nvls_multimem": "nvls_multimem", "nvshmem": "sm_ldst", "tk_pgl": "tma"}
CALL_KINDS = {
    "all_reduce": "all_reduce", "all_gather": "all_gather",
    "all_gather_into_tensor": "all_gather", "_all_gather_base": "all_gather",
    "all_gather_object": "all_gather", "reduce_scatter": "reduce_scatter",
    "reduce_scatter_tensor": "reduce_scatter", "_reduce_scatter_base": "reduce_scatter",
    "all_to_all": "all_to_all", "all_to_all_single": "all_to_all", "broadcast": "broadcast",
    "broadcast_object_list": "broadcast", "reduce": "reduce", "scatter": "scatter",
    "scatter_object_list": "scatter", "gather": "gather", "gather_object": "gather",
    "send": "send_recv", "recv": "send_recv", "isend": "send_recv", "irecv": "send_recv",
    "batch_isend_irecv": "send_recv",
}
BARRIER_CALLS = ("barrier", "monitored_barrier")
SETUP_CALLS = ("init_process_group", "destroy_process_group", "new_subgroups")
METADATA_MARK = " (metadata)"  # how the inspection marks a metadata call on the hot path
QUERY_CALLS = ("get_rank", "get_world_size", "is_initialized", "is_available", "get_backend",
               "get_process_group_ranks", "get_group_rank", "get_global_rank", "new_group")
RENDEZVOUS_CALLS = 2  # a handle exchange and a barrier
OBJECT_CALLS = {"all_gather_object", "broadcast_object_list", "gather_object",
                "scatter_object_list", "send_object_list", "recv_object_list"}  # pickled: no size
KIND_WORDS = {"all_reduce": "all-reduce", "all_gather": "all-gather",
              "reduce_scatter": "reduce-scatter", "all_to_all": "all-to-all",
              "broadcast": "broadcast", "reduce": "reduce", "gather": "gather",
              "scatter": "scatter", "send_recv": "send/recv"}
NEGLIGIBLE_US = 1e-6  # a term below this gets no fix (rounding of a zero)
_CALL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")


@dataclass(frozen=True)
class GapTerm:
    name: str  # a TERMS entry
    time_us: float  # after scaling; the residual may be negative
    share: float | None  # time_us / gap_us (None when the gap is 0)
    model_us: float  # before scaling (the residual: equal to time_us)
    evidence: str  # what triggered it, with the numbers
    fix: str | None  # what to try (None when the term is 0)
    predicted_after_fix_us: float | None  # the simulator's time with that fix


@dataclass(frozen=True)
class OpCarrier:
    """How the inspected implementation carries one comm op, as the model reads it."""

    op: str
    kind: str
    carried_by: str | None  # a vocabulary mechanism (nccl_payload, tma, ...) or None: unknown
    mechanism: str | None  # the topology's mechanism
    algorithm: str | None
    time_us: float | None  # alpha-beta time at size (NCCL: its tuner's estimate), all repeats
    best_us: float  # t*_o: the best (algorithm, mechanism) at size
    best: str  # "mechanism/algorithm" of t*_o


@dataclass(frozen=True)
class Gap:
    task: str
    topology: str
    world_size: int
    measured_us: float
    t_roof_us: float
    binding: str
    gap_us: float  # measured - t_roof
    modeled_us: float  # t_roof + the named terms before scaling (T_model)
    scale: float  # factor applied to the named terms (1.0 unless capped)
    terms: tuple[GapTerm, ...]  # named terms by size, then the residual
    ops: tuple[OpCarrier, ...]
    predicted_nccl_reference_us: float
    predicted_custom_best_us: float
    predicted_candidate_us: float | None  # the simulator's nearest form of the implementation
    reference_model: str  # the model of PKB's reference every nccl_reference time ran
    notes: tuple[str, ...] = ()

    @property
    def attainment(self) -> float:
        return self.t_roof_us / self.measured_us

    def term(self, name: str) -> GapTerm:
        for t in self.terms:
            if t.name == name:
                return t
        raise KeyError(name)


# ---------------------------------------------------------------- the inspection

@dataclass(frozen=True)
class MetaCall:
    """A hot torch.distributed call that moves metadata, not the payload (a counts vector, a
    flag, a norm: the inspection's size rule), with its size where the inspection bounds it."""

    call: str  # torch.distributed name, e.g. all_gather_into_tensor
    line: int | None = None
    elements: int | None = None
    dtype: str | None = None


@dataclass(frozen=True)
class Profile:
    """An inspection, checked: what the implementation does."""

    mechanisms: frozenset[str]
    calls: tuple[str, ...]  # normalised torch.distributed call names on the hot path (payload)
    flags: Mapping[str, bool] = field(hash=False)
    kernels: int = 0
    host_syncs: int = 0
    lines: Mapping[str, tuple[str, ...]] = field(default_factory=dict, hash=False)
    program: Program | None = field(default=None, hash=False)  # the reference's traced program
    metadata: tuple[str, ...] = ()  # hot calls marked "(metadata)", barriers included
    meta: tuple[MetaCall, ...] = ()  # those that count as metadata calls, sizes where known

    def flag(self, name: str) -> bool:
        return bool(self.flags.get(name, False))

    @property
    def custom(self) -> list[str]:
        return sorted(m for m in self.mechanisms if m != NCCL)

    def cite(self, name: str) -> str:
        where = self.lines.get(name)
        return f"{name} (lines {', '.join(where)})" if where else name


def read_inspection(data: Mapping[str, Any], source: str = "inspection") -> Profile:
    """Check an inspection mapping; bad fields raise a PkbsimError naming them."""

    def fail(key: str, message: str) -> PkbsimError:
        return UsageError(message, file=source, field=key)

    mechs = data.get("mechanisms")
    if not isinstance(mechs, Sequence) or isinstance(mechs, str):
        raise fail("mechanisms", "expected a list of mechanism names")
    unknown = [m for m in mechs if m not in MECHANISMS]
    if unknown:
        raise fail("mechanisms", f"unknown {unknown[0]!r}; expected {', '.join(MECHANISMS)}")
    calls = data.get("nccl_on_hot_path", [])
    if not isinstance(calls, Sequence) or isinstance(calls, str) or not all(
            isinstance(c, str) for c in calls):
        raise fail("nccl_on_hot_path", "expected a list of call names")
    metadata = tuple(_call_name(c) for c in calls if c.endswith(METADATA_MARK))
    payload = tuple(_call_name(c) for c in calls if not c.endswith(METADATA_MARK))
    meta = _meta_calls(data.get("call_sites", ()), metadata, fail)
    flags: dict[str, bool] = {}
    for name in FLAGS:
        value = data.get(name, False)
        if not isinstance(value, bool):
            raise fail(name, f"expected true or false, got {value!r}")
        flags[name] = value
    lines = _evidence_lines(data.get("evidence", {}), fail)
    launched = any(m not in (NCCL, "copy_engine") for m in mechs) or flags["fused_comm_compute"]
    kernels = max(_count(data, "custom_kernels", int(launched), fail), int(launched))
    syncs = _count(data, "host_syncs", len(lines.get("host_sync", ())) or 1, fail) if flags[
        "host_sync"] else 0
    program = data.get("program")
    if program is not None and not isinstance(program, Program):
        raise fail("program", "expected a traced reference program (pkbsim.trace.program)")
    return Profile(frozenset(mechs), payload, flags, kernels, syncs, lines, program, metadata,
                   meta)


def _meta_calls(sites: object, metadata: tuple[str, ...], fail: _Fail
                ) -> tuple[MetaCall, ...]:
    """The hot metadata calls that count as calls (not barriers, queries or group creation):
    each hot ``nccl_metadata`` call site, with the size the inspection bounded; a name marked
    "(metadata)" on the hot path that no call site gives, of unknown size."""
    if not isinstance(sites, Sequence) or isinstance(sites, str):
        raise fail("call_sites", "expected a list of call sites")
    found: list[MetaCall] = []
    for i, site in enumerate(sites):
        get = site.get if isinstance(site, Mapping) else (
            lambda key, default=None, s=site: getattr(s, key, default))
        if get("kind") != "nccl_metadata" or get("path") != "hot":
            continue
        call, line = get("call"), get("line")
        elements, dtype = get("elements"), get("dtype")
        if not isinstance(call, str) or not isinstance(line, int) or isinstance(line, bool):
            raise fail(f"call_sites[{i}]", "expected a call name and a line number")
        if elements is not None and (isinstance(elements, bool) or not isinstance(
                elements, int) or elements < 0):
            raise fail(f"call_sites[{i}].elements", f"expected a whole number >= 0, got "
                                                    f"{elements!r}")
        if dtype is not None and not isinstance(dtype, str):
            raise fail(f"call_sites[{i}].dtype", f"expected a dtype name, got {dtype!r}")
        if _counts_as_meta(call):
            found.append(MetaCall(call, line, elements, dtype))
    given = {m.call for m in found}
    found += [MetaCall(c) for c in metadata if _counts_as_meta(c) and c not in given]
    return tuple(found)


def _counts_as_meta(call: str) -> bool:
    return call not in BARRIER_CALLS and call not in QUERY_CALLS and call not in SETUP_CALLS


_Fail = Callable[[str, str], PkbsimError]


def _count(data: Mapping[str, Any], key: str, default: int, fail: _Fail) -> int:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise fail(key, f"expected a whole number >= 0, got {value!r}")
    return value


def _evidence_lines(value: object, fail: _Fail) -> dict[str, tuple[str, ...]]:
    if not isinstance(value, Mapping):
        raise fail("evidence", "expected a mapping of name to line numbers")
    out = {}
    for name, where in value.items():
        items = [where] if isinstance(where, (int, str)) else where
        if not isinstance(items, Sequence):
            raise fail(f"evidence.{name}", "expected a list of line numbers")
        if items:  # plain line numbers, or (line, snippet) pairs as inspect.py gives them
            out[str(name)] = tuple(str(_first(i)) for i in items)
    return out


def _first(item: object) -> object:
    if isinstance(item, Sequence) and not isinstance(item, str) and item:
        return item[0]
    return item


def _call_name(text: str) -> str:
    match = _CALL_NAME.search(text)
    name = match.group(0) if match else text
    return name.rsplit(".", 1)[-1]


def reference_inspection(inst: TaskInstance, reference: ReferenceModel | None = None
                         ) -> dict[str, Any]:
    """The inspection of PKB's reference: eager PyTorch and NCCL, no custom kernel, nothing
    fused or overlapped, read off the model ``reference`` chose (default
    ``reference_model(inst)``): its traced program (the collectives it calls, its host
    synchronisations, the program itself under ``program``) or the task file's ops."""
    ref = reference if reference is not None else reference_model(inst)
    _same_instance(inst, ref)
    comm = [op for op in inst.ops if isinstance(op, CommOp)]
    chosen = ref.program
    if chosen is None:
        calls = {_call_name(op.api or op.kind) for op in comm}
        syncs = sum(op.host_syncs * op.repeat for op in inst.ops)
    else:
        segments = chosen.program.segments
        calls = {_call_name(s.collective.name) for s in segments
                 if s.end == "collective" and s.collective is not None}
        syncs = sum(s.times for s in segments if s.end == "sync")
    out: dict[str, Any] = {"mechanisms": [NCCL] if comm or calls else [],
                           "nccl_on_hot_path": sorted(calls)}
    out.update({name: False for name in FLAGS})
    out["host_sync"] = syncs > 0
    out["host_syncs"] = syncs
    out["custom_kernels"] = 0
    if chosen is not None:
        out["program"] = chosen.program
    return out


def _same_instance(inst: TaskInstance, ref: ReferenceModel) -> None:
    if ref.inst is not inst and ref.inst != inst:
        raise UsageError(f"the reference model is of another instance ({ref.inst.spec.key} "
                         f"at W = {ref.inst.world_size}) than {inst.spec.key} at W = "
                         f"{inst.world_size}")


# ---------------------------------------------------------------- carriers

@dataclass(frozen=True)
class _Carried:
    bound: CommBound
    carrier: OpCarrier
    t_mech_s: float | None  # t_c(o): the carrier's time at size, its algorithm's bytes aside
    t_excess_s: float  # one_shot's extra bytes at k's rate
    pin: OpOverride | None  # how custom_best reproduces this carrier
    nccl: bool


def _carriers(inst: TaskInstance, topo: Topology, roof: Roofline,
              prof: Profile | None) -> list[_Carried]:
    custom = [TOPOLOGY_MECHANISM[m] for m in prof.custom] if prof else []
    custom = [k for k in custom if k in topo.mechanisms]
    nccl_kinds = {CALL_KINDS[c] for c in prof.calls if c in CALL_KINDS} if prof else set()
    out = []
    for b in roof.comm:
        o, best = b.op, b.best_at_size
        base = OpCarrier(o.id, o.kind, None, None, None, None, best.t_total_s / US,
                         f"{best.mechanism}/{best.algorithm}")
        fitting = [c for c in b.candidates if c.mechanism in custom]
        if prof is None:
            out.append(_Carried(b, base, None, 0.0, None, False))
        elif NCCL in prof.mechanisms and (o.kind in nccl_kinds or _call_name(o.api or "")
                                          in prof.calls or not fitting):
            out.append(_nccl_carrier(inst, topo, b, base))
        elif fitting:
            out.append(_custom_carrier(b, base, fitting, prof))
        else:
            out.append(_Carried(b, base, None, 0.0, None, False))
    return out


def _nccl_carrier(inst: TaskInstance, topo: Topology, b: CommBound,
                  base: OpCarrier) -> _Carried:
    o = b.op
    ctx = group_context(o, group_members(o, inst.world_size)[0], topo)
    choice = nccl.choose(o, o.bytes_per_rank * o.imbalance, ctx, inst.world_size,
                         fabric_for(topo))
    pairs = {(c.algorithm, c.mechanism) for c in b.candidates}
    pin = (OpOverride(mechanism=choice.mechanism, algorithm=choice.algorithm)
           if (choice.algorithm, choice.mechanism) in pairs else None)
    t_nccl = o.repeat * choice.estimate_s
    carrier = replace(base, carried_by=NCCL, mechanism=choice.mechanism,
                      algorithm=choice.algorithm, time_us=t_nccl / US)
    return _Carried(b, carrier, t_nccl, 0.0, pin, True)


def _custom_carrier(b: CommBound, base: OpCarrier, fitting: list[Candidate],
                    prof: Profile) -> _Carried:
    one_shot = [c for c in fitting if c.algorithm == "one_shot"]
    use_one_shot = prof.flag("one_shot") and bool(one_shot)
    pick = min(one_shot if use_one_shot else fitting, key=lambda c: (c.t_total_s, c.t_bw_s))
    k = pick.mechanism
    on_k = [c for c in fitting if c.mechanism == k]
    best_on_k = min(on_k, key=lambda c: (c.t_total_s, c.t_bw_s))
    excess = 0.0
    if use_one_shot:
        excess = max(0.0, pick.t_bw_s - min(c.t_bw_s for c in on_k))
    vocab = next(m for m in prof.custom if TOPOLOGY_MECHANISM[m] == k)
    used = pick if use_one_shot else best_on_k
    carrier = replace(base, carried_by=vocab, mechanism=k, algorithm=used.algorithm,
                      time_us=used.t_total_s / US)
    pin = OpOverride(mechanism=k, algorithm="one_shot" if use_one_shot else None)
    return _Carried(b, carrier, best_on_k.t_total_s, excess, pin, False)


# ---------------------------------------------------------------- terms

@dataclass(frozen=True)
class _Raw:
    name: str
    gpu_s: float  # on the GPU's stream: adds to T_g
    host_s: float  # Python dispatch: adds to T_h, shows only beyond T_g
    evidence: str
    fix: str | None
    serial_s: float = 0.0  # host synchronisations: added after max(T_g, T_h)


def _launch_sync(inst: TaskInstance, topo: Topology, prof: Profile,
                 carried: list[_Carried]) -> _Raw:
    lat = topo.latency
    sigma = topo.scale_up.signal_latency_us
    k = prof.kernels
    n_custom = sum(c.bound.op.repeat for c in carried if c.pin and not c.nccl)
    payload = {CALL_KINDS.get(c) for c in prof.calls} & {c.bound.op.kind for c in carried}
    # a plain name (no "(metadata)" mark) is a metadata call unless the task has its kind
    meta = [MetaCall(c) for c in prof.calls if c not in BARRIER_CALLS and c not in QUERY_CALLS
            and not (c in CALL_KINDS and CALL_KINDS[c] in payload)] + list(prof.meta)
    if prof.program is not None:  # the traced calls themselves, each a payload call
        p = sum(s.times for s in prof.program.segments if s.end == "collective")
        meta = []
    else:
        p = sum(c.bound.op.repeat for c in carried if c.nccl)
    barrier = prof.flag("host_barrier_per_call") or any(
        c in BARRIER_CALLS for c in (*prof.calls, *prof.metadata))
    rdv = prof.flag("per_call_rendezvous")
    barriers = max(n_custom, 1) if prof.flag("device_barrier") else 0
    calls = int(barrier) + RENDEZVOUS_CALLS * int(rdv) + len(meta)
    latencies = [_meta_latency(m, topo, inst.world_size) for m in meta]
    gpu = (max(k - 1, 0) * lat.kernel_launch_us + barriers * sigma
           + (int(barrier) + RENDEZVOUS_CALLS * int(rdv)) * lat.nccl_call_us
           + math.fsum(t for t, _ in latencies))
    host = k * lat.host_launch_us + (p + calls) * lat.host_collective_us
    parts = []
    if k:
        parts.append(f"{k} custom kernel(s) per call: {max(k - 1, 0)} launch(es) beyond the "
                     f"floor's one x {lat.kernel_launch_us:g} us, host {k} x "
                     f"{lat.host_launch_us:g} us")
    if p:
        parts.append(f"{p} torch.distributed payload call(s) x {lat.host_collective_us:g} us "
                     "host")
    if barriers:
        parts.append(f"{prof.cite('device_barrier')}: {barriers} extra sync step(s) x "
                     f"{sigma:g} us")
    if barrier:
        parts.append(f"{prof.cite('host_barrier_per_call')}: one dist.barrier per call "
                     f"({lat.nccl_call_us:g} us GPU, {lat.host_collective_us:g} us host)")
    if rdv:
        parts.append(f"{prof.cite('per_call_rendezvous')}: handle exchange + barrier, "
                     f"2 x ({lat.nccl_call_us:g} us GPU, {lat.host_collective_us:g} us host)")
    if meta:
        parts.append(f"{len(meta)} metadata call(s): " + "; ".join(
            text for _, text in latencies))
    fixes = ["fuse the work into one kernel launched once per call"] if k > 1 or p else []
    if barrier or barriers:
        fixes.append("replace barriers by per-peer flags in the kernel")
    if rdv:
        fixes.append("set up symmetric memory / IPC handles once, outside the timed call")
    if meta:
        fixes.append("exchange counts, flags and norms inside the kernel (or compute them on "
                     "the device) instead of in separate NCCL calls")
    if not fixes:  # one launch: the harness's floor; only less host work per call helps
        fixes.append("cut Python work per call (one launch is PKB's floor; a CUDA graph "
                     "replay costs less host time than several launches)")
    fix = "; ".join(fixes)
    return _Raw("launch_sync_latency", gpu * US, host * US, "; ".join(parts),
                fix[0].upper() + fix[1:] + ".")


def _meta_latency(m: MetaCall, topo: Topology, world_size: int) -> tuple[float, str]:
    """A metadata call's GPU latency per call (us) and its evidence: the simulator's time of
    that collective at its size (pkbsim.sim.simulate_nccl_call: NCCL's own choice, its
    stream's launch included) when the inspection bounded the size, else nccl_call_us."""
    kind = CALL_KINDS.get(m.call)
    where = f" (line {m.line})" if m.line else ""
    what = f"an NCCL {KIND_WORDS.get(kind or '', m.call)}" if kind else f"a {m.call}"
    if m.elements is not None and kind is not None and m.call not in OBJECT_CALLS:
        nbytes = m.elements * ITEMSIZE.get(m.dtype or "", 4)
        size = f"{m.elements} {m.dtype} value(s)" if m.dtype else f"{m.elements} element(s)"
        latency = _simulated_call_us(topo, kind, nbytes, world_size)
        if latency is not None:
            return latency, (f"{what} of {size}{where} on every call: about {latency:.3g} us "
                             "of latency (simulated at that size)")
        return topo.latency.nccl_call_us, (
            f"{what} of {size}{where} on every call: about {topo.latency.nccl_call_us:g} us "
            "of latency (nccl_call_us; the simulator cannot run it here)")
    return topo.latency.nccl_call_us, (
        f"{what}{where}, size unknown, on every call: about {topo.latency.nccl_call_us:g} us "
        "of latency (nccl_call_us)")


@functools.lru_cache(maxsize=256)
def _simulated_call_us(topo: Topology, kind: str, nbytes: int, world_size: int
                       ) -> float | None:
    try:
        return simulate_nccl_call(topo, kind, nbytes, world_size).time_s / US
    except PkbsimError:
        return None


def _mechanism(carried: list[_Carried]) -> _Raw:
    excess = [(c, c.t_mech_s, c.t_mech_s - c.bound.best_at_size.t_total_s) for c in carried
              if c.t_mech_s is not None]
    worse = sorted(((c, t, d) for c, t, d in excess if d > 0), key=lambda x: -x[2])
    parts = []
    for c, t, _ in worse:
        o, how = c.bound.op, c.carrier
        size = format_bytes(o.bytes_per_rank) + (f" x{o.repeat}" if o.repeat > 1 else "")
        what = (f"NCCL's {how.algorithm} on {how.mechanism}" if c.nccl else
                f"{how.carried_by} -> {how.mechanism}, at best")
        parts.append(f"{o.id} ({o.kind}, {size}): {what} {t / US:.3g} us vs "
                     f"{how.best} {how.best_us:.3g} us")
    fixes = [f"{c.carrier.op} with {c.carrier.best}" + (" in a custom kernel instead of NCCL"
                                                         if c.nccl else "") for c, _, _ in worse]
    return _Raw("mechanism_inefficiency", math.fsum(d for _, _, d in worse), 0.0,
                "; ".join(parts), ("Carry " + "; ".join(fixes) + ".") if fixes else None)


def _excess_bytes(prof: Profile, carried: list[_Carried]) -> _Raw:
    hits = [c for c in carried if c.t_excess_s > 0]
    parts = [f"{prof.cite('one_shot')}: {c.carrier.op} reads every peer's whole buffer on "
             f"{c.carrier.mechanism}: {c.t_excess_s / US:.3g} us of extra bytes on the busiest "
             "port" for c in hits]
    fix = ("Use a two-shot (reduce-scatter + all-gather) or NVLS all-reduce: (n-1)(n-2)/n "
           "fewer buffers per port." if hits else None)
    return _Raw("excess_bytes", sum(c.t_excess_s for c in hits), 0.0, "; ".join(parts), fix)


def _overlap(inst: TaskInstance, roof: Roofline, prof: Profile) -> _Raw:
    has_comm = any(isinstance(o, CommOp) for o in inst.ops)
    has_compute = any(isinstance(o, ComputeOp) for o in inst.ops)
    overlapped = prof.flag("overlap_attempt") or prof.flag("fused_comm_compute")
    if not (has_comm and has_compute) or overlapped:
        why = ("overlap_attempt or fused_comm_compute" if overlapped
               else "the task has no comm and compute to overlap")
        return _Raw("missing_overlap", 0.0, 0.0, f"none: {why}", None)
    t_mc = max(roof.t_mem_s, roof.t_comp_s)
    gpu = max(0.0, roof.t_comm_s + t_mc - roof.t_roof_s)
    return _Raw("missing_overlap", gpu, 0.0,
                f"no overlap_attempt or fused_comm_compute: t_comm {roof.t_comm_s / US:.3g} us + "
                f"max(t_mem, t_comp) {t_mc / US:.3g} us run one after the other",
                "Pipeline: cut the buffer into chunks so chunk i's communication overlaps chunk "
                "i+1's compute, or fuse the communication into the compute kernel.")


def _host_sync(topo: Topology, prof: Profile) -> _Raw:
    s, h_s = prof.host_syncs, topo.latency.host_sync_us
    if not s:
        return _Raw("host_sync", 0.0, 0.0, "none", None)
    return _Raw("host_sync", 0.0, 0.0,
                f"{prof.cite('host_sync')}: {s} synchronisation(s) per call x {h_s:g} us",
                "Keep values on the GPU: no .item(), .tolist() or synchronize on the hot path "
                "(bound sizes, or compute them on the device).", serial_s=s * h_s * US)


def _unfused(inst: TaskInstance, topo: Topology, roof: Roofline, prof: Profile) -> _Raw:
    if prof.program is not None:
        return _unfused_program(prof.program, topo, roof, prof)
    compute = [o for o in inst.ops if isinstance(o, ComputeOp)]
    if not compute or prof.flag("fused_comm_compute"):
        why = "fused_comm_compute" if compute else "the task has no compute ops"
        return _Raw("unfused_pytorch", 0.0, 0.0, f"none: {why}", None)
    lat = topo.latency
    launches = sum(max(o.repeat * o.launches, 1) for o in compute)
    left = max(0, launches - max(prof.kernels - 1, 0))
    passes = 2 * sum(o.bytes_per_rank * o.imbalance * o.repeat for o in inst.ops
                     if isinstance(o, CommOp))
    gpu = left * lat.eager_kernel_us * US + passes / topo.gpu.hbm_Bps
    text = (f"no fused_comm_compute: {left} eager PyTorch kernel(s) x "
            f"({lat.eager_kernel_us:g} us GPU, {lat.host_launch_us:g} us host)")
    if passes:
        text += f"; comm buffers through HBM once more: {format_bytes(passes)}"
    return _Raw("unfused_pytorch", gpu, left * lat.host_launch_us * US, text, FUSE_FIX)


FUSE_FIX = "Fuse the PyTorch ops around the communication into the communicating kernel."


def _unfused_program(program: Program, topo: Topology, roof: Roofline, prof: Profile) -> _Raw:
    """The traced reference's eager operators: U kernels at L_e each plus their device time
    beyond the roofline's max(t_mem, t_comp); the host issuing every operator (its class's
    cost) and the call itself."""
    lat = topo.latency
    kernels = sum(s.kernel_count * s.times for s in program.segments)
    device_s = math.fsum(device_time_s(s, topo) * s.times for s in program.segments)
    host_s = lat.host_call_us * US + math.fsum(host_time_s(s, topo) * s.times
                                               for s in program.segments)
    if prof.flag("fused_comm_compute") or (kernels == 0 and host_s == 0):
        why = "fused_comm_compute" if kernels or host_s else "the program issues no operator"
        return _Raw("unfused_pytorch", 0.0, 0.0, f"none: {why}", None)
    left = max(0.0, kernels - max(prof.kernels - 1, 0))
    kept = left / kernels if kernels else 1.0
    t_mc = max(roof.t_mem_s, roof.t_comp_s)
    extra_s = max(0.0, device_s - t_mc)
    gpu = left * lat.eager_kernel_us * US + extra_s * kept
    text = (f"traced program: {left:g} eager PyTorch kernel(s) x {lat.eager_kernel_us:g} us GPU "
            f"and {device_s / US:.3g} us of kernel time against max(t_mem, t_comp) "
            f"{t_mc / US:.3g} us; host {host_s / US:.3g} us issuing its operators")
    return _Raw("unfused_pytorch", gpu, host_s * kept, text, FUSE_FIX)


# ---------------------------------------------------------------- simulator configurations

@dataclass(frozen=True)
class _Config:
    base: str  # nccl_reference (the chosen reference model) | custom_best (the task's ops)
    pins: tuple[tuple[str, OpOverride], ...] = ()  # custom_best only
    chunks: int | None = None  # custom_best only
    host_syncs: bool = True  # nccl_reference: keep the reference's host synchronisations


class _Sims:
    """Simulated times of configurations, each run once. Every nccl_reference configuration
    runs ``reference`` (its traced program or the task file's ops), with or without its host
    synchronisations; custom_best runs the task file's ops."""

    def __init__(self, inst: TaskInstance, topo: Topology, reference: ReferenceModel) -> None:
        self.inst, self.topo, self.reference = inst, topo, reference
        self.done: dict[_Config, SimResult] = {}

    def us(self, cfg: _Config) -> float:
        if cfg.base == "custom_best":
            cfg = replace(cfg, host_syncs=True)  # custom_best makes no host syncs anyway
        else:
            assert not cfg.pins and cfg.chunks is None, "pins name the task file's ops"
            if self.reference.without_host_syncs() is self.reference:
                cfg = replace(cfg, host_syncs=True)  # it has none to remove
        if cfg not in self.done:
            if cfg.base == "nccl_reference":
                ref = self.reference if cfg.host_syncs else self.reference.without_host_syncs()
                self.done[cfg] = ref.simulate(self.topo)
            else:
                self.done[cfg] = simulate(self.inst, self.topo,
                                          Strategy(cfg.base, dict(cfg.pins), cfg.chunks))
        return self.done[cfg].predicted_us

    def try_us(self, cfg: _Config) -> float | None:
        """A configuration pinned from an inspection: None if the simulator refuses it."""
        try:
            return self.us(cfg)
        except PkbsimError:
            return None


def _candidate_config(prof: Profile, carried: list[_Carried]) -> _Config:
    known = [c for c in carried if c.carrier.carried_by is not None]
    nccl_only = prof.kernels == 0 and all(c.nccl for c in known) and not prof.flag(
        "fused_comm_compute")
    chunks = None if prof.flag("overlap_attempt") or prof.flag("fused_comm_compute") else 1
    if nccl_only:
        return _Config("nccl_reference", (), None, prof.flag("host_sync"))
    pins = tuple((c.bound.op.id, c.pin) for c in known if c.pin is not None)
    return _Config("custom_best", pins, chunks)


def _fix_config(name: str, cand: _Config, carried: list[_Carried]) -> _Config:
    nccl_pins = tuple((c.bound.op.id, c.pin) for c in carried if c.nccl and c.pin is not None)
    custom = cand if cand.base == "custom_best" else _Config("custom_best", nccl_pins, 1)
    if name in ("launch_sync_latency", "unfused_pytorch"):
        return custom
    if name == "mechanism_inefficiency":
        pins = tuple((op, OpOverride(algorithm="one_shot")) for op, p in custom.pins
                     if p.algorithm == "one_shot")
        return replace(custom, pins=pins)
    if name == "excess_bytes":
        pins = tuple((op, replace(p, algorithm=None)) for op, p in custom.pins)
        return replace(custom, pins=pins)
    if name == "missing_overlap":
        return replace(custom, chunks=None)
    if name == "host_sync":
        return replace(cand, host_syncs=False)
    return _Config("custom_best")


# ---------------------------------------------------------------- decompose

def decompose(inst: TaskInstance, topo: Topology, measured_s: float,
              inspection: Mapping[str, Any] | None = None, *,
              simulate_fixes: bool = True, reference: ReferenceModel | None = None) -> Gap:
    """Split ``measured_s - t_roof`` into the named terms and the residual (module docstring).
    ``simulate_fixes=False`` skips the per-fix simulations (``predicted_after_fix_us`` None).
    ``reference``: the model of PKB's reference (default ``reference_model(inst)``) that every
    nccl_reference time runs; give the one ``reference_inspection`` read."""
    if not math.isfinite(measured_s) or measured_s <= 0:
        raise UsageError(f"measured time must be above 0, got {measured_s:g} s")
    ref = reference if reference is not None else reference_model(inst)
    _same_instance(inst, ref)
    roof = compute_roofline(inst, topo)
    failed = inspection.get("error") if inspection is not None else None
    prof = read_inspection(inspection) if inspection is not None and not failed else None
    carried = _carriers(inst, topo, roof, prof)
    raws = _raws(inst, topo, roof, prof, carried)
    values, modeled_s, host_note = _values(raws, roof.t_roof_s)
    gap_s = measured_s - roof.t_roof_s
    scale, notes = _scale(gap_s, math.fsum(values.values()), measured_s, roof.t_roof_s)
    notes = ([host_note] if host_note else []) + notes + _input_notes(topo, prof, failed)
    sims = _Sims(inst, topo, ref)
    cand = _candidate_config(prof, carried) if prof is not None else None
    gap_us = gap_s / US
    terms = []
    for raw in raws:
        value_us = values[raw.name] * scale / US
        active = value_us > NEGLIGIBLE_US
        after = (sims.try_us(_fix_config(raw.name, cand, carried))
                 if simulate_fixes and cand is not None and active else None)
        terms.append(GapTerm(raw.name, value_us, _share(value_us, gap_us),
                             values[raw.name] / US, raw.evidence or "none",
                             raw.fix if active else None, after))
    terms.sort(key=lambda t: (-t.time_us, TERMS.index(t.name)))
    residual_us = gap_us - math.fsum(t.time_us for t in terms)
    terms.append(GapTerm("residual", residual_us, _share(residual_us, gap_us), residual_us,
                         _residual_evidence(prof, carried),
                         "Profile the kernel (nsys) and compare with the simulator's timeline "
                         "(pkbsim simulate --gantt).", sims.us(_Config("custom_best"))))
    return Gap(
        task=inst.spec.key, topology=topo.name, world_size=inst.world_size,
        measured_us=measured_s / US, t_roof_us=roof.t_roof_s / US, binding=roof.binding,
        gap_us=gap_us, modeled_us=modeled_s / US, scale=scale, terms=tuple(terms),
        ops=tuple(c.carrier for c in carried),
        predicted_nccl_reference_us=sims.us(_Config("nccl_reference")),
        predicted_custom_best_us=sims.us(_Config("custom_best")),
        predicted_candidate_us=sims.try_us(cand) if cand is not None else None,
        reference_model=ref.label,
        notes=tuple(notes))


def _scale(gap_s: float, total_s: float, measured_s: float, t_roof_s: float
           ) -> tuple[float, list[str]]:
    """The factor on the named terms: 1, gap / sum when they exceed the gap, 0 without one."""
    if gap_s <= 0:
        return 0.0, [f"measured {measured_s / US:.3g} us is at or below t_roof "
                     f"{t_roof_s / US:.3g} us: the bound is too high here (check the "
                     "topology's numbers) or the measurement is off; every named term is 0"]
    if total_s > gap_s:
        scale = gap_s / total_s
        return scale, [f"the named terms add up to {total_s / US:.3g} us, more than the gap "
                       f"{gap_s / US:.3g} us: each is scaled by {scale:.3g} (the causes overlap "
                       "in time more than the model's sum assumes)"]
    return 1.0, []


def _input_notes(topo: Topology, prof: Profile | None, failed: object) -> list[str]:
    notes = []
    if failed:
        notes.append(f"the inspection failed ({failed}): no evidence")
    if prof is None:
        notes.append("no inspection: every cause needs the solution's evidence, so the whole "
                     "gap is residual (reference_inspection(inst) describes PKB's reference)")
        return notes
    for name in prof.custom:
        if TOPOLOGY_MECHANISM[name] not in topo.mechanisms:
            notes.append(f"{name}: topology {topo.name} has no "
                         f"{TOPOLOGY_MECHANISM[name]} mechanism; ignored")
    return notes


def _raws(inst: TaskInstance, topo: Topology, roof: Roofline, prof: Profile | None,
          carried: list[_Carried]) -> list[_Raw]:
    if prof is None:
        return [_Raw(name, 0.0, 0.0, "none: no inspection", None) for name in TERMS[:-1]]
    return [_launch_sync(inst, topo, prof, carried), _mechanism(carried),
            _excess_bytes(prof, carried), _overlap(inst, roof, prof), _host_sync(topo, prof),
            _unfused(inst, topo, roof, prof)]


def _values(raws: list[_Raw], t_roof_s: float) -> tuple[dict[str, float], float, str | None]:
    """Each term's modelled seconds: its GPU and serial parts plus its share of the host
    dispatch that shows beyond the GPU's work; T_model; a note on host dispatch."""
    t_gpu = t_roof_s + math.fsum(r.gpu_s for r in raws)
    t_host = math.fsum(r.host_s for r in raws)
    visible = max(0.0, t_host - t_gpu)
    values = {r.name: r.gpu_s + r.serial_s + (r.host_s * visible / t_host if t_host else 0.0)
              for r in raws}
    modeled = max(t_gpu, t_host) + math.fsum(r.serial_s for r in raws)
    note = (f"host dispatch {t_host / US:.3g} us per call against GPU work {t_gpu / US:.3g} us: "
            f"{visible / US:.3g} us of it shows" if t_host > 0 else None)
    return values, modeled, note


def _share(value_s: float, gap_s: float) -> float | None:
    return value_s / gap_s if gap_s != 0 else None


def _residual_evidence(prof: Profile | None, carried: list[_Carried]) -> str:
    parts = ["what the named terms do not explain"]
    unknown = [c.carrier.op for c in carried if c.carrier.carried_by is None]
    if prof is not None and unknown:
        parts.append(f"no listed mechanism carries {', '.join(unknown)}")
    if prof is not None:
        seen = [prof.cite(f) for f in ("grid_capped", "uncoalesced_peer") if prof.flag(f)]
        if seen:
            parts.append(f"seen but not quantified: {', '.join(seen)}")
    return "; ".join(parts)
