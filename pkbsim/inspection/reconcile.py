"""Static findings checked against what a run executed (``pkbsim run``'s profiler records).

Per call, over the profiled ranks (the most any rank ran):

- a hot ``nccl_payload`` call site when no NCCL kernel ran becomes ``fallback``, with the run
  log as its condition, and ``nccl_payload`` leaves the mechanisms;
- NCCL kernels that ran while no call site was hot: the undecided (``unknown``) sites become
  hot; with none, one site from the profiler is added;
- peer copies that ran (``Memcpy PtoP``, or a ``cudaMemcpyPeer*``/``cuMemcpyPeer*`` API call)
  while no ``copy_engine`` site was hot: the undecided ones become hot, or a site from the
  profiler is added, and ``copy_engine`` joins the mechanisms;
- a hot ``copy_engine`` site when no memcpy of any kind ran becomes ``fallback``.

A profile that recorded an error, or ran no call, changes nothing and says so in the notes.
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
PROFILER_LINE = 0  # a finding from the profiler has no line in the file


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
    nccl = max(p.nccl_per_call() for p in usable)
    ptop = max(p.memcpy_per_call("PtoP") for p in usable)
    peer_api = max(sum(op.per_call for op in p.runtime if op.name.startswith(PEER_API_PREFIXES))
                   for p in usable)
    any_copy = max(p.memcpy_per_call() + sum(op.per_call for op in p.runtime
                                             if op.name.startswith(MEMCPY_API_PREFIXES))
                   for p in usable)
    calls = min(p.iterations for p in usable)
    where = f"profiler, {calls} call(s) of {files}"
    sites = list(row.call_sites)
    notes = list(row.notes)
    mechanisms = set(row.mechanisms)
    evidence = {k: tuple(v) for k, v in row.evidence.items()}
    sites, notes_n = _settle(sites, "nccl_payload", nccl > 0, f"{nccl:g} NCCL kernel(s) per call",
                             f"no NCCL kernel ran ({where})", "NCCL kernel", where)
    sites, notes_c = _settle(sites, "copy_engine", ptop + peer_api > 0,
                             f"{ptop:g} peer memcpy(s) and {peer_api:g} peer-copy API call(s) "
                             "per call", f"no memcpy ran ({where})", "peer memcpy", where,
                             demote=any_copy == 0)
    notes += notes_n + notes_c
    for kind in ("nccl_payload", "copy_engine"):
        hot = [s for s in sites if s.kind == kind and s.path == "hot"]
        if hot:
            mechanisms.add(kind)
            evidence[kind] = tuple((s.line, s.snippet or s.condition) for s in hot)
        else:
            mechanisms.discard(kind)
            evidence.pop(kind, None)
    nccl_hot = _nccl_hot_path(sites)
    if not any(s.kind.startswith("nccl") and s.path == "hot" for s in sites):
        evidence.pop("nccl_on_hot_path", None)
    return dataclasses.replace(
        row, call_sites=tuple(sorted(sites, key=lambda s: (s.line, s.kind))),
        mechanisms=tuple(sorted(mechanisms)), nccl_on_hot_path=nccl_hot,
        evidence=dict(sorted(evidence.items())), notes=tuple(notes))


def _settle(sites: list[CallSite], kind: str, ran: bool, ran_text: str, none_text: str,
            added_call: str, where: str, demote: bool = True
            ) -> tuple[list[CallSite], list[str]]:
    hot = [s for s in sites if s.kind == kind and s.path == "hot"]
    notes: list[str] = []
    if ran and not hot:
        unknown = [s for s in sites if s.kind == kind and s.path == "unknown"]
        if unknown:
            sites = [dataclasses.replace(s, path="hot", condition=f"{ran_text} ({where})",
                                         source="profiler") if s in unknown else s
                     for s in sites]
            notes.append(f"run log: {ran_text}: the undecided {kind} site(s) ran")
        else:
            sites = [*sites, CallSite(PROFILER_LINE, added_call, kind, "hot",
                                      f"{ran_text} ({where})", source="profiler")]
            notes.append(f"run log: {ran_text}, which inspection did not find")
    elif not ran and hot and demote:
        sites = [dataclasses.replace(s, path="fallback", condition=none_text, source="profiler")
                 if s in hot else s for s in sites]
        notes.append(f"run log: {none_text}: {len(hot)} hot {kind} site(s) are fallbacks")
    return sites, notes


def _nccl_hot_path(sites: Sequence[CallSite]) -> tuple[str, ...]:
    first: dict[str, int] = {}
    for s in sites:
        if s.path == "hot" and s.kind in ("nccl_payload", "nccl_metadata") and \
                s.source == "static":
            entry = s.call if s.kind == "nccl_payload" else f"{s.call} (metadata)"
            first[entry] = min(first.get(entry, s.line), s.line)
    return tuple(sorted(first, key=lambda e: (first[e], e)))
