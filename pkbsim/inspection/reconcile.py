"""Static findings checked against what a run executed (``pkbsim run``'s profiler records).

NCCL ran, per call, when NCCL kernels ran or the host issued a PyTorch collective op
(``c10d::allreduce_``...): at W = 1 NCCL's all-reduce launches no kernel, only its host op
shows. Per call, over the profiled ranks (the most any rank ran):

- a ``nccl_payload`` call site whose operation ran (``all_reduce`` for ``c10d::allreduce_``)
  but is not hot becomes hot, with the run log as evidence (the candidate took a fallback, or
  an undecided branch, on every call);
- a hot ``nccl_payload`` site when no NCCL ran at all, or when the host's collective ops were
  recorded and its operation is not among them, becomes ``fallback``, and ``nccl_payload``
  leaves the mechanisms when no site stays hot;
- NCCL that ran with no site to account for it (a hot payload site, or a hot collective the
  size rule makes metadata, of its operation) is added as a site from the profiler (line 0);
- peer copies that ran (``Memcpy PtoP``, or a ``cudaMemcpyPeer*``/``cuMemcpyPeer*`` API call,
  which is how a peer copy within one GPU shows) while no ``copy_engine`` site was hot: the
  undecided sites become hot, or a site from the profiler is added;
- a hot ``copy_engine`` site when no memcpy of any kind ran becomes ``fallback``.

A profile that recorded an error, or profiled no call, changes nothing and says so.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from pkbsim.inspection.call_sites import CallSite
from pkbsim.inspection.solution import Inspection
from pkbsim.pkb.run_profile import RunProfile

PEER_API_PREFIXES = ("cudaMemcpyPeer", "cuMemcpyPeer")
MEMCPY_API_PREFIXES = ("cudaMemcpy", "cuMemcpy")
COLLECTIVE_PREFIXES = ("c10d::", "_c10d_functional::", "c10d_functional::")
PROFILER_LINE = 0  # a finding from the profiler has no line in the file
# PyTorch's collective ops (c10d / functional) and the torch.distributed calls that issue them
OP_CALLS = {
    "allreduce_": {"all_reduce"}, "all_reduce": {"all_reduce"},
    "allreduce_coalesced_": {"all_reduce_coalesced"},
    "allgather_": {"all_gather"}, "_allgather_base_": {"all_gather_into_tensor",
                                                       "_all_gather_base"},
    "all_gather_into_tensor": {"all_gather_into_tensor", "all_gather_tensor"},
    "allgather_into_tensor_coalesced_": {"all_gather_into_tensor", "all_gather_coalesced"},
    "reduce_scatter_": {"reduce_scatter"},
    "_reduce_scatter_base_": {"reduce_scatter_tensor", "_reduce_scatter_base"},
    "reduce_scatter_tensor": {"reduce_scatter_tensor"},
    "alltoall_": {"all_to_all"}, "alltoall_base_": {"all_to_all_single"},
    "all_to_all_single": {"all_to_all_single"}, "broadcast_": {"broadcast"},
    "broadcast": {"broadcast"}, "reduce_": {"reduce"}, "gather_": {"gather"},
    "scatter_": {"scatter"}, "send": {"send", "isend", "batch_isend_irecv"},
    "recv_": {"recv", "irecv", "batch_isend_irecv"},
    "recv_any_source_": {"recv", "irecv"},
}
OP_CALLS_ALL = {call for calls in OP_CALLS.values() for call in calls}


def profiles_for(file: str, profiles: Sequence[RunProfile]) -> list[RunProfile]:
    """The candidate profiles of this solution file: those naming it, else those of the
    problem and backend its name gives (``<problem stem>_<backend>.py``), else, when the run
    log holds one candidate only, that one's."""
    candidates = [p for p in profiles if p.variant != "reference"]
    name = Path(file).name
    named = [p for p in candidates if p.solution and Path(p.solution).name == name]
    if named:
        return named
    stem = Path(file).stem
    by_path = [p for p in candidates if p.problem and p.backend
               and stem == f"{p.problem}_{p.backend}"]
    if by_path:
        return by_path
    runs = {(p.problem, p.backend, p.solution) for p in candidates}
    return candidates if len(runs) == 1 else []


@dataclasses.dataclass(frozen=True)
class _Ran:
    """What the profiled calls executed, per call (the most any rank ran)."""

    where: str
    nccl_kernels: float
    ops: dict[str, float]  # torch.distributed call -> per call, from the host's ops
    op_text: str  # e.g. "c10d::allreduce_ 1 per call"
    ptop: float
    peer_api: float
    any_copy: float

    @property
    def nccl(self) -> bool:
        return self.nccl_kernels > 0 or bool(self.ops)


def _ran(usable: Sequence[RunProfile], files: str) -> _Ran:
    ops: dict[str, float] = {}
    names: dict[str, float] = {}
    for p in usable:
        for op in p.collectives:
            if not op.name.startswith(COLLECTIVE_PREFIXES) or op.per_call <= 0:
                continue
            names[op.name] = max(names.get(op.name, 0.0), op.per_call)
            for call in OP_CALLS.get(op.name.split("::", 1)[1], set()):
                ops[call] = max(ops.get(call, 0.0), op.per_call)
    return _Ran(
        where=f"profiler, {min(p.iterations for p in usable)} call(s) of {files}",
        nccl_kernels=max(p.nccl_per_call() for p in usable), ops=ops,
        op_text=", ".join(f"{n} {v:g} per call" for n, v in sorted(names.items())),
        ptop=max(p.memcpy_per_call("PtoP") for p in usable),
        peer_api=max(sum(op.per_call for op in p.runtime
                         if op.name.startswith(PEER_API_PREFIXES)) for p in usable),
        any_copy=max(p.memcpy_per_call() + sum(op.per_call for op in p.runtime
                                               if op.name.startswith(MEMCPY_API_PREFIXES))
                     for p in usable))


def reconcile(row: Inspection, profiles: Sequence[RunProfile]) -> Inspection:
    """The inspection with its call sites and mechanisms corrected by what ran."""
    if row.error is not None:
        return row
    if not profiles:
        return dataclasses.replace(row, notes=(*row.notes, "run log: no profile of this file"))
    usable = [p for p in profiles if p.error is None and p.iterations > 0]
    files = ", ".join(sorted({p.file for p in profiles}))
    if not usable:
        return dataclasses.replace(row, notes=(*row.notes, f"run log {files}: no usable "
                                               "profile (error or no call profiled)"))
    ran = _ran(usable, files)
    sites, notes = _nccl(list(row.call_sites), ran)
    sites, copy_notes = _copies(sites, ran)
    notes = [*row.notes, *notes, *copy_notes]
    mechanisms = set(row.mechanisms)
    evidence = {k: tuple(v) for k, v in row.evidence.items()}
    for kind in ("nccl_payload", "copy_engine"):
        hot = [s for s in sites if s.kind == kind and s.path == "hot"]
        if hot:
            mechanisms.add(kind)
            evidence[kind] = tuple((s.line, s.snippet or s.condition) for s in hot)
        else:
            mechanisms.discard(kind)
            evidence.pop(kind, None)
    nccl_hot = [s for s in sites if s.path == "hot" and s.kind.startswith("nccl")]
    if nccl_hot:
        evidence["nccl_on_hot_path"] = tuple((s.line, s.snippet or s.condition)
                                             for s in nccl_hot)
    else:
        evidence.pop("nccl_on_hot_path", None)
    return dataclasses.replace(
        row, call_sites=tuple(sorted(sites, key=lambda s: (s.line, s.kind))),
        mechanisms=tuple(sorted(mechanisms)), nccl_on_hot_path=_nccl_hot_path(sites),
        evidence=dict(sorted(evidence.items())), notes=tuple(notes))


def _nccl(sites: list[CallSite], ran: _Ran) -> tuple[list[CallSite], list[str]]:
    payload = [s for s in sites if s.kind == "nccl_payload"]
    notes: list[str] = []
    out = []
    for s in sites:
        if s.kind != "nccl_payload":
            out.append(s)
        elif s.path != "hot" and (s.call in ran.ops or (
                not ran.ops and ran.nccl_kernels > 0 and s.path == "unknown")):
            what = ran.op_text or f"{ran.nccl_kernels:g} NCCL kernel(s) per call"
            out.append(dataclasses.replace(s, path="hot", source="profiler", condition=(
                f"ran on every call: {what} ({ran.where}); the inspection said "
                f"{s.path}: {s.condition}")))
            notes.append(f"run log: line {s.line} {s.call} ran on every call "
                         f"(inspection: {s.path})")
        elif s.path == "hot" and (not ran.nccl or (ran.ops and s.call in OP_CALLS_ALL
                                                   and s.call not in ran.ops)):
            why = ("no NCCL kernel and no collective op ran" if not ran.nccl
                   else f"only {ran.op_text} ran")
            out.append(dataclasses.replace(s, path="fallback", source="profiler",
                                           condition=f"{why} ({ran.where})"))
            notes.append(f"run log: line {s.line} {s.call} did not run: {why}")
        else:
            out.append(s)
    # a hot metadata collective (the size rule's) accounts for the op it runs too
    accounted = {s.call for s in out if s.path == "hot" and (
        s.kind == "nccl_payload" or (s.kind == "nccl_metadata" and s.elements is not None))}
    if ran.nccl and not accounted & set(ran.ops) and not (not ran.ops and any(
            s.path == "hot" for s in out if s.kind == "nccl_payload" or (
                s.kind == "nccl_metadata" and s.elements is not None))):
        what = ran.op_text or f"{ran.nccl_kernels:g} NCCL kernel(s) per call"
        out.append(CallSite(PROFILER_LINE, "NCCL", "nccl_payload", "hot",
                            f"{what} ({ran.where})", source="profiler"))
        notes.append(f"run log: NCCL ran ({what}), which no call site of the file accounts for"
                     if payload else f"run log: NCCL ran ({what}), which inspection did not find")
    return out, notes


def _copies(sites: list[CallSite], ran: _Ran) -> tuple[list[CallSite], list[str]]:
    hot = [s for s in sites if s.kind == "copy_engine" and s.path == "hot"]
    peer = ran.ptop + ran.peer_api
    text = (f"{ran.ptop:g} peer memcpy(s) and {ran.peer_api:g} peer-copy API call(s) per call "
            f"({ran.where})")
    if peer > 0 and not hot:
        unknown = [s for s in sites if s.kind == "copy_engine" and s.path == "unknown"]
        if unknown:
            return ([dataclasses.replace(s, path="hot", condition=text, source="profiler")
                     if s in unknown else s for s in sites],
                    [f"run log: {text}: the undecided copy_engine site(s) ran"])
        return ([*sites, CallSite(PROFILER_LINE, "peer memcpy", "copy_engine", "hot", text,
                                  source="profiler")],
                [f"run log: {text}, which inspection did not find"])
    if hot and ran.any_copy == 0:
        why = f"no memcpy ran ({ran.where})"
        return ([dataclasses.replace(s, path="fallback", condition=why, source="profiler")
                 if s in hot else s for s in sites],
                [f"run log: {why}: {len(hot)} hot copy_engine site(s) are fallbacks"])
    return sites, []


def _nccl_hot_path(sites: Sequence[CallSite]) -> tuple[str, ...]:
    first: dict[str, int] = {}
    for s in sites:
        if s.path == "hot" and s.kind in ("nccl_payload", "nccl_metadata") and \
                s.line != PROFILER_LINE:
            entry = s.call if s.kind == "nccl_payload" else f"{s.call} (metadata)"
            first[entry] = min(first.get(entry, s.line), s.line)
    return tuple(sorted(first, key=lambda e: (first[e], e)))
