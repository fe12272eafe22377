"""A run log for the inspection's reconciliation (``pkbsim inspect --run-log``, ``pkbsim
compare --solution``): ``pkbsim run``'s ``rank_<r>_profile.json`` files, or PyTorch profiler
(Kineto) traces a user made, counted per call in the same form.
"""

from __future__ import annotations

import bisect
import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from pkbsim.inputs import path_kind
from pkbsim.pkb.run_profile import (
    ProfiledOp,
    RunProfile,
    RunProfileError,
    load_run_profiles,
)
from pkbsim.timeline.kineto import (
    RawEvent,
    TraceFileError,
    parse_trace,
    trace_files,
)

_PROFILE = re.compile(r"^rank_\d{1,7}_profile\.json$")


def load_run_log(path: Path) -> list[RunProfile]:
    """``pkbsim run``'s profiles under ``path`` (a file or folder); where there are none, the
    Kineto traces there, each counted per call (:func:`run_profile_of`)."""
    kind = path_kind(path, error=RunProfileError)
    if kind == "file":
        if not _PROFILE.match(path.name) and _is_trace(path):
            return [run_profile_of(path)]
        return load_run_profiles(path)
    try:
        return load_run_profiles(path)
    except RunProfileError as exc:
        if kind != "folder" or "no rank_<r>_profile.json" not in exc.message:
            raise
        try:
            files = trace_files(path)
        except TraceFileError:
            raise RunProfileError("no rank_<r>_profile.json found (pkbsim run writes them in "
                                  "logs/problem_<stem>/<backend>/), nor a PyTorch profiler "
                                  "trace", file=str(path)) from None
        return [run_profile_of(f) for f in files]


def _is_trace(path: Path) -> bool:
    """Does the file start like a Chrome trace (gzip, or JSON naming traceEvents early)?"""
    try:
        with open(path, "rb") as handle:
            head = handle.read(4096)
    except OSError:
        return False
    return head[:2] == b"\x1f\x8b" or b"traceEvents" in head or b"schemaVersion" in head


RUNTIME_PREFIXES = ("cudaMemcpy", "cuMemcpy", "cudaLaunchKernel", "cuLaunchKernel", "cudaMemset")
COLLECTIVE_PREFIXES = ("c10d::", "_c10d_functional::")


def run_profile_of(path: str | Path, call_marker: str | None = None) -> RunProfile:
    """A Kineto trace's counts per call in the form of ``rank_<r>_profile.json``
    (:class:`pkbsim.pkb.run_profile.RunProfile`, variant ``candidate`` unless the path says
    ``reference``): what ``pkbsim inspect --run-log`` reconciles with the static findings."""
    t = parse_trace(path, call_marker)
    name, gpu, runtime, host, main, markers = t.name, t.gpu, t.runtime, t.host, t.main, t.markers
    rank, world = t.rank, t.world_size
    calls = max(len(markers), 1)

    starts = [m.ts for m in markers]

    def inside(r: RawEvent) -> bool:
        k = bisect.bisect_right(starts, r.ts) - 1
        return k >= 0 and r.ts <= markers[k].end

    kernels: Counter[str] = Counter()
    nccl: Counter[str] = Counter()
    copies: Counter[str] = Counter()
    sets: Counter[str] = Counter()
    times: dict[str, float] = defaultdict(float)
    launched = {r.corr: r for r in runtime if r.corr is not None}
    for g in gpu:
        r = launched.get(g.corr) if g.corr is not None else None
        if r is None or not inside(r):
            continue
        if g.cat == "memcpy":
            words = g.name.split()
            key = words[1] if len(words) > 1 and words[0] == "Memcpy" else g.name
            copies[key] += 1
            times["memcpy:" + key] += g.end - g.ts
        elif g.cat == "memset":
            sets["memset"] += 1
            times["memset"] += g.end - g.ts
        elif "nccl" in g.name.lower():
            nccl[g.name] += 1
            times["nccl:" + g.name] += g.end - g.ts
        else:
            kernels[g.name] += 1
            times["kernel:" + g.name] += g.end - g.ts
    api = Counter(r.name for r in runtime if r.tid == main and inside(r)
                  and r.name.startswith(RUNTIME_PREFIXES))
    colls = Counter(h.name for h in host if h.tid == main and inside(h)
                    and h.name.startswith(COLLECTIVE_PREFIXES))

    def listed(counts: Counter[str], prefix: str | None) -> tuple[Any, ...]:
        return tuple(ProfiledOp(k, n / calls, None if prefix is None else
                                times[prefix + k] / calls)
                     for k, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))

    problem, backend = _pkb_names(Path(name))
    variant = "reference" if backend == "reference" else "candidate"
    return RunProfile(
        file=name, problem=problem, backend=backend, rank=rank, world_size=world,
        variant=variant, solution=None, iterations=calls, kernels=listed(kernels, "kernel:"),
        nccl_kernels=listed(nccl, "nccl:"), memcpy=listed(copies, "memcpy:"),
        memset=tuple(ProfiledOp("memset", n / calls, times["memset"] / calls)
                     for n in sets.values()),
        runtime=listed(api, None), device="cuda" if gpu else "cpu",
        collectives=listed(colls, None))


def _pkb_names(path: Path) -> tuple[str | None, str | None]:
    """(problem stem, backend) of a trace in PKB's layout, else (None, None)."""
    parts = path.parts
    for i, part in enumerate(parts[:-2]):
        if part.startswith("problem_") and len(part) > len("problem_"):
            return part[len("problem_"):], parts[i + 1]
    return None, None
