"""Memory as a bound (issue 33): a simulation's peak memory, estimated before it is built, and
its resident size watched while it runs.

A simulation's memory is a sum of items, each counted before any node exists
(:func:`count`) and priced at the bytes one costs (:data:`BYTES`, fitted on measured runs:
``benchmarks/sim_memory.py``, docs/measurements.md):

- ``ranks``: per simulated rank, its links and the simulation's per-rank arrays;
- ``nodes``: timed nodes (``Builder.nodes_needed``), each with its dependencies and work;
- ``members``: a rank's part of a collective call (``CollectiveRun`` keeps per-member state,
  and every call stays alive to the end: its nodes hold it);
- ``messages``: the deliveries a call remembers (``CollectiveRun._arrived``, never emptied);
- ``routes``: the per-call route cache (``CollectiveRun._routes``), per distinct send of a rank;
- ``pairs``: the simulation's and the fabric's route caches (``Simulation._uses``,
  ``Fabric._routes``), per distinct send, weighted by its endpoints;
- ``live``: flows alive at once (a Flow, its finish event, its entries in its links' tables),
  weighted by endpoints;
- ``programs``: the state of the programs (generators) running at once, deep-sized on a
  sample of ranks.

The counts come from the calls the strategy will make (``nccl_reference``: NCCL's choice per
call, cheap; ``custom_best``: the most expensive of the candidates it will try) and from each
call's program, run through without simulating on a sample of ranks (every rank where that is
cheap: at most :data:`SAMPLE_PRIMS` sends and :data:`SAMPLE_RANK_WORK` / n ranks), so the
count of a call of W ranks costs about as much as a few of its ranks' programs. Where the
estimate is wrong, ``pkbsim.sim.resident.watch`` (called by the flow budget every
``WATCH_FLOWS`` transfers)
stops the simulation once the process's resident memory passes the limit, before the kernel's
out-of-memory killer would end it without a word.
"""

from __future__ import annotations

import gc
import itertools
import sys
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from pkbsim.errors import InfeasibleError
from pkbsim.limits import SIM_MEMORY
from pkbsim.sim import resident
from pkbsim.sim.resident import MIB

if TYPE_CHECKING:
    from pkbsim.sim.collective import CallSpec
    from pkbsim.sim.strategies import Builder

SAMPLE_PRIMS = 10_000  # sends counted per distinct call at most (then ranks are sampled)
# ranks x members counted per distinct call at most (making a rank's program can cost O(n))
SAMPLE_RANK_WORK = 2**19
SIZED_RANKS = 8  # ranks whose programs' state is measured per distinct call
DEEP_ITEMS = 64  # items of a container sized one by one (the rest scaled from them)

# Bytes per item: fitted on the fit half of the measured runs (benchmarks/sim_memory.py,
# docs/measurements.md), the fit scaled to over-estimate every one of them, then x 1.25 for
# cases unlike them, rounded up
BYTES: dict[str, float] = {
    "ranks": 0.0,
    "nodes": 800.0,
    "members": 100.0,
    "messages": 240.0,
    "routes": 300.0,
    "pairs": 650.0,
    "live": 600.0,
    "programs": 2.0,
}


@dataclass
class Counts:
    """The items of one simulation (see the module's docstring); floats where sampled."""

    ranks: float = 0.0
    nodes: float = 0.0
    members: float = 0.0
    messages: float = 0.0
    routes: float = 0.0
    pairs: float = 0.0
    live: float = 0.0
    programs: float = 0.0  # bytes, deep-sized

    def __add__(self, other: Counts) -> Counts:
        return Counts(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    def scaled(self, k: float) -> Counts:
        return Counts(*(getattr(self, f.name) * k for f in fields(self)))

    def as_dict(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def estimate_bytes(counts: Counts, prices: dict[str, float] | None = None) -> float:
    """Peak bytes a simulation of these counts adds to the process, by :data:`BYTES`."""
    prices = prices or BYTES
    return sum(prices[name] * value for name, value in counts.as_dict().items())


# ---------------------------------------------------------------- one call's program

@dataclass
class _CallCounts:
    """One call, per member rank on average (over the ranks counted)."""

    sends: float = 0.0  # flows started, all chunks
    messages: float = 0.0  # deliveries (a send to k ranks is k)
    routes: float = 0.0  # distinct sends (srcs, dsts) of the rank
    pairs: float = 0.0  # the same, weighted by endpoints
    live: float = 0.0  # sends outstanding at once, weighted by endpoints
    programs: float = 0.0  # bytes of its programs' state
    channels: int = 1
    extra: dict[str, float] = field(default_factory=dict)


def _rank_order(n: int) -> Iterator[int]:
    """0, n-1, then ever finer evenly spaced ranks (each once): a spread sample at any cut."""
    yield 0
    if n > 1:
        yield n - 1
    seen = {0, n - 1}
    step = n
    while step > 1:
        step = max(1, step // 2)
        for r in range(step, n - 1, step):
            if r not in seen:
                seen.add(r)
                yield r
        if len(seen) >= n:
            return


def _deep_size(obj: Any, seen: set[int], depth: int = 0) -> int:
    """Bytes of a program's own state: containers, numbers and text it holds, through
    generator frames and closures; shared objects (the call's context, the algorithm) are
    not followed."""
    if id(obj) in seen or depth > 50:
        return 0
    seen.add(id(obj))
    if isinstance(obj, bool) or obj is None:
        return 0
    if isinstance(obj, int):
        return 0 if -5 <= obj <= 256 else sys.getsizeof(obj)
    if isinstance(obj, float | str | bytes):
        return sys.getsizeof(obj)
    size = 0
    if isinstance(obj, tuple | list | set | frozenset):
        size = sys.getsizeof(obj)
        items = len(obj)
        if items > DEEP_ITEMS:  # a long container: its first items, scaled to all of them
            head = list(itertools.islice(obj, DEEP_ITEMS))
            return size + round(sum(_deep_size(i, seen, depth + 1) for i in head)
                                * items / DEEP_ITEMS)
        for item in obj:
            size += _deep_size(item, seen, depth + 1)
    elif isinstance(obj, dict):
        size = sys.getsizeof(obj)
        for key, value in obj.items():
            size += _deep_size(key, seen, depth + 1) + _deep_size(value, seen, depth + 1)
    elif hasattr(obj, "gi_frame"):  # a generator: its frame's locals, and what it yields from
        size = sys.getsizeof(obj) + 400  # the frame itself
        frame = obj.gi_frame
        if frame is not None:
            for value in frame.f_locals.values():
                size += _deep_size(value, seen, depth + 1)
        size += _deep_size(getattr(obj, "gi_yieldfrom", None), seen, depth + 1)
    elif callable(obj) and hasattr(obj, "__closure__"):  # a local function: its cells
        size = sys.getsizeof(obj)
        for cell in obj.__closure__ or ():
            size += 56 + _deep_size(cell.cell_contents, seen, depth + 1)
    return size


def _call_counts(spec: CallSpec) -> _CallCounts:
    """Run each channel's program of the ranks of ``spec`` (all of them where that costs at
    most SAMPLE_PRIMS primitives, else a spread sample) through, with one chunk (the chunks
    repeat it), counting what the simulation keeps per rank."""
    from pkbsim.collectives.base import BATCH, SEND

    n = spec.ctx.n
    alg = spec.algorithm
    channels = alg.channels(spec.kind, spec.ctx) if n > 1 else 1
    out = _CallCounts(channels=channels)
    chunks = max(spec.chunks, 1)
    ranks = sized = 0
    prims = 0
    for rank in _rank_order(n):
        keys: set[tuple[Any, Any]] = set()
        for ch in range(channels):
            gen = alg.program(spec.kind, spec.nbytes, spec.ctx, rank, 1, ch)
            first = True
            widest = 0
            for prim in gen:
                prims += 1
                op = prim[0]
                sends: tuple[Any, ...] = ()
                if op == SEND:
                    sends = (prim[1:],)
                elif op == BATCH:
                    sends = prim[1]
                if not sends and not first:
                    continue
                if first and ranks < SIZED_RANKS:  # the program's state where it first waits
                    out.programs += _deep_size(gen, {id(spec.ctx), id(alg)})
                first = False
                prims += len(sends)
                width = 0
                for srcs, dsts, _nbytes, _tag in sends:
                    out.sends += chunks
                    out.messages += len(dsts) * chunks
                    ends = len(srcs) + len(dsts)
                    width += ends
                    if (srcs, dsts) not in keys:
                        keys.add((srcs, dsts))
                        out.pairs += ends
                widest = max(widest, width)
            out.live += widest
        out.routes += len(keys)
        ranks += 1
        sized = min(ranks, SIZED_RANKS)
        if prims > SAMPLE_PRIMS or ranks * n >= SAMPLE_RANK_WORK:
            break
    if ranks:
        for name in ("sends", "messages", "routes", "pairs", "live"):
            setattr(out, name, getattr(out, name) / ranks)
        out.programs /= sized
    return out


# ---------------------------------------------------------------- the calls of a simulation

_COUNTS: dict[Any, _CallCounts] = {}  # one call's counts, by its description


@dataclass
class _Call:
    counts: _CallCounts
    groups: list[list[int]]
    times: float  # calls of it per iteration (each group)
    at_once: float  # of its calls one rank may run at the same time


def _costliest(specs: list[CallSpec], cache: dict[Any, _CallCounts]) -> _CallCounts:
    """The counts of the call of ``specs`` that costs most memory."""
    best: _CallCounts | None = None
    best_bytes = -1.0
    for spec in specs:
        # the program's shape, not its bytes nor the mechanism moving them, sets the counts
        key = (spec.algorithm.name, spec.kind, spec.ctx, spec.chunks)
        found = cache.get(key)
        if found is None:
            found = cache[key] = _call_counts(spec)
        b = estimate_bytes(_per_call(found, spec.ctx.n, spec.ctx.n, 1.0))
        if best is None or b > best_bytes:
            best, best_bytes = found, b
    assert best is not None
    return best


def _per_call(c: _CallCounts, n: int, simulated: float, at_once: float) -> Counts:
    """Items of one call of ``n`` members of which ``simulated`` are simulated, with
    ``at_once`` of its kind running at the same time on a rank."""
    return Counts(members=simulated, messages=c.messages * simulated,
                  routes=c.routes * simulated, pairs=c.pairs * simulated,
                  live=c.live * simulated * at_once, programs=c.programs * simulated * at_once)


def _calls(builder: Builder) -> list[_Call]:
    """Every kind of collective call one iteration of the builder's strategy makes (custom_best:
    the call it chose where it has, else the costliest of its candidates)."""
    from pkbsim.task.schema import CommOp

    strategy = builder.strategy
    if len(_COUNTS) > 512:
        _COUNTS.clear()
    cache = _COUNTS  # a call's counts are the same in every check: each is counted once
    out: list[_Call] = []
    if strategy.name == "nccl_reference" and strategy.program is not None:
        for index, seg in enumerate(strategy.program.program.segments):
            if seg.end != "collective" or seg.collective is None:
                continue
            op = builder.comm_op(seg.collective, f"seg{index}")
            if op is None or op.group_size == 1:
                continue
            spec = builder.spec(op, 0, op.bytes_per_rank)
            out.append(_Call(_costliest([spec], cache), builder.groups(op), seg.times, 1.0))
        return out
    comm = [op for op in builder.inst.ops
            if isinstance(op, CommOp) and op.group_size > 1 and op.repeat > 0]
    for op in comm:
        if strategy.name == "nccl_reference":
            spec = builder.spec(op, 0, op.bytes_per_rank * op.imbalance)
            out.append(_Call(_costliest([spec], cache), builder.groups(op), op.repeat, 1.0))
        else:
            k = builder.pieces_of(op)
            nbytes = op.bytes_per_rank * op.imbalance / k
            chosen = builder.chosen(op, 0, nbytes)  # known when built again (coarser classes)
            specs = ([chosen] if chosen is not None
                     else builder.candidate_calls(op, nbytes))
            if not specs:
                continue
            # instances of an op not chained may all run at once (pieces run in order)
            out.append(_Call(_costliest(specs, cache), builder.groups(op), op.repeat * k,
                             1.0 if op.chain else float(op.repeat)))
    return out


def count(builder: Builder, iterations: int, ranks: Collection[int] | None = None,
          nodes: float | None = None) -> Counts:
    """The items of the simulation ``builder`` is about to build (``iterations`` back to
    back), where only ``ranks`` (global ranks; None: all of them) are simulated and it makes
    ``nodes`` timed nodes (None: ``builder.nodes_needed(iterations)``, scaled to the ranks)."""
    w = builder.w
    simulated = w if ranks is None else len(ranks)
    wanted = None if ranks is None else set(ranks)
    total = Counts(ranks=simulated)
    total.nodes = (builder.nodes_needed(iterations) * simulated / w if nodes is None
                   else nodes)
    reference = builder.strategy.name == "nccl_reference"
    peak = Counts()  # what lives while calls run: one call at a time on a rank (reference)
    for call in _calls(builder):
        n = len(call.groups[0])
        here = float(len(call.groups) * n) if wanted is None else float(
            sum(1 for group in call.groups for r in group if r in wanted))
        one = _per_call(call.counts, n, here, call.at_once)
        kept = Counts(members=one.members, messages=one.messages, routes=one.routes)
        total = total + kept.scaled(call.times * iterations)
        # the caches of the simulation and fabric hold each distinct send once
        total.pairs += one.pairs * min(call.times, n)
        running = Counts(live=one.live, programs=one.programs)
        if reference:
            if estimate_bytes(running) > estimate_bytes(peak):
                peak = running
        else:
            peak = peak + running
    total = total + peak
    if not reference and peak.live:  # custom_best also simulates calls alone to choose
        total = total + peak
    return total


def estimate(builder: Builder, iterations: int, ranks: Collection[int] | None = None,
             nodes: float | None = None) -> float:
    """Peak bytes the simulation adds to the process (see :func:`count`)."""
    return estimate_bytes(count(builder, iterations, ranks, nodes))


# ---------------------------------------------------------------- the limit

def check(builder: Builder, iterations: int, ranks: Collection[int] | None = None,
          nodes: float | None = None) -> None:
    """Refuse, before building, a simulation whose estimated peak (on top of what the process
    holds now) passes SIM_MEMORY."""
    need = estimate(builder, iterations, ranks, nodes)
    if (resident.read_resident() + need) / MIB > SIM_MEMORY.value:
        gc.collect()  # an earlier simulation's nodes (cycles) may still be held: free them
        SIM_MEMORY.check((resident.read_resident() + need) / MIB, f"simulating task "
                         f"{builder.inst.spec.key} at W = {builder.w} (estimated peak memory, "
                         "MiB)", InfeasibleError)
