"""Derived capacity-planning answers: thresholds, crossovers, the SM split, the latency exit.

Collective answers time one bare call alone (``simulate_collective``, every rank entering at
once), pipelined in custom_best's 64 KiB chunks; a contender's time at a size is its fastest
(algorithm, mechanism) pair there. Sizes are bytes per rank (nccl-tests' buffer convention),
whole multiples of ``GRANULARITY_BYTES``; searches bracket by doubling and bisect on log-size
until the bracket is within ``REL_TOL``.

Line rate (threshold's reference): nccl-tests' busbw at the roofline's line-rate time without
in-switch reduction (``t_comm_line_rate_no_switch_reduction``): the per-GPU port rate inside an
NVLink domain (450 GB/s on dgx-h100), the NIC-bound rate across nodes. NVLS's busbw can exceed
it (metrics.md section 1), so NVLS may reach a fraction where no wire could.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pkbsim.collectives import ALGORITHMS, algbw_busbw
from pkbsim.collectives.base import Context, algorithms_for
from pkbsim.errors import UsageError
from pkbsim.placement import fits, network_reduces
from pkbsim.planning.evaluate import collective_spec
from pkbsim.roofline import roofline
from pkbsim.sim import simulate_collective
from pkbsim.sim.strategies import CUSTOM_CHUNK_BYTES
from pkbsim.task.loader import instantiate
from pkbsim.task.schema import COMM_KINDS
from pkbsim.topology.schema import Topology
from pkbsim.units import GB, US

GRANULARITY_BYTES = 256
DEFAULT_LO_BYTES = 256
DEFAULT_HI_BYTES = 4 * 2**30
REL_TOL = 0.01
MECHANISM_CONTENDERS = ("copy_engine", "sm_ldst", "tma")
MODES = ("mechanisms", "algorithms")


@dataclass(frozen=True)
class ThresholdResult:
    """The smallest message one mechanism needs to reach ``fraction`` of line rate."""

    mechanism: str
    fraction: float
    line_rate_busbw_GBps: float
    target_busbw_GBps: float
    size_bytes: int | None  # None: not reached up to the search's upper bound
    algorithm: str | None  # the best algorithm at size_bytes
    busbw_at_size_GBps: float | None
    max_busbw_GBps: float  # the most seen on the doubling sweep (and the bisection)
    max_busbw_at_bytes: int


@dataclass(frozen=True)
class Contender:
    """An algorithm and/or a mechanism; None = the best there is at each size."""

    algorithm: str | None = None
    mechanism: str | None = None

    @property
    def label(self) -> str:
        return "/".join(x for x in (self.algorithm, self.mechanism) if x) or "any"


@dataclass(frozen=True)
class Crossover:
    """Where the fastest contender changes: ``below`` wins at size_bytes - step, ``above`` at
    size_bytes (the crossing lies in (below_bytes, size_bytes], within REL_TOL)."""

    size_bytes: int
    below_bytes: int
    below: str
    above: str
    below_how: str  # algorithm/mechanism the winner used at below_bytes
    above_how: str
    below_time_us: float  # at size_bytes
    above_time_us: float


def check_collective(topo: Topology, kind: str, world_size: int) -> Context:
    """Validate the call's options; the placement context of ranks 0..world_size-1."""
    if kind not in COMM_KINDS:
        raise UsageError(f"--collective {kind}: expected one of " + ", ".join(COMM_KINDS))
    if not 2 <= world_size <= topo.total_gpus:
        raise UsageError(f"--world-size {world_size}: expected 2 to {topo.total_gpus} "
                         f"(the GPUs of {topo.name})")
    per_node: dict[int, int] = {}
    for r in range(world_size):
        per_node[topo.node_of(r)] = per_node.get(topo.node_of(r), 0) + 1
    sizes = set(per_node.values())
    return Context(n=world_size, pattern="ring" if kind == "send_recv" else None,
                   nodes=len(per_node), per_node=sizes.pop() if len(sizes) == 1 else 0)


def carriers(topo: Topology, kind: str, world_size: int, algorithm: str | None = None,
             mechanism: str | None = None) -> list[tuple[str, str]]:
    """Every (algorithm, mechanism) the topology allows for this call, as the roofline's."""
    ctx = check_collective(topo, kind, world_size)
    if algorithm is not None and algorithm not in ALGORITHMS:
        raise UsageError(f"--algorithm {algorithm}: expected one of " + ", ".join(ALGORITHMS))
    if mechanism is not None and mechanism not in topo.mechanisms:
        raise UsageError(f"--mechanism {mechanism}: topology {topo.name} has "
                         + ", ".join(topo.mechanisms))
    one_node = ctx.nodes == 1
    pairs = []
    for alg in algorithms_for(kind, ctx):
        if algorithm is not None and alg.name != algorithm:
            continue
        if alg.needs_switch_reduction and not (topo.scale_up.in_switch_reduction and one_node):
            continue
        if alg.needs_multicast and not (topo.scale_up.multicast and one_node):
            continue
        if alg.needs_network_reduction and not network_reduces(topo):
            continue
        pairs += [(alg.name, m.name) for m in topo.mechanisms.values()
                  if (mechanism is None or m.name == mechanism) and fits(alg, m, kind)]
    return pairs


class CallCurve:
    """The fastest of some (algorithm, mechanism) pairs at each size, memoised."""

    def __init__(self, topo: Topology, kind: str, world_size: int,
                 pairs: Sequence[tuple[str, str]]) -> None:
        self.topo, self.kind, self.world_size, self.pairs = topo, kind, world_size, pairs
        self.seen: dict[int, tuple[float, str]] = {}

    def __call__(self, nbytes: int) -> tuple[float, str]:
        """(time_s, "algorithm/mechanism") of the fastest pair at ``nbytes`` per rank."""
        if nbytes not in self.seen:
            best = (math.inf, "")
            for alg, mech in self.pairs:
                chunks = ALGORITHMS[alg].pipeline_chunks(self.kind, nbytes, self.world_size,
                                                         CUSTOM_CHUNK_BYTES)
                t = simulate_collective(self.topo, self.kind, nbytes, self.world_size, alg,
                                        mech, chunks).time_s
                if t < best[0]:
                    best = (t, f"{alg}/{mech}")
            self.seen[nbytes] = best
        return self.seen[nbytes]

    def busbw_Bps(self, nbytes: int) -> float:
        return algbw_busbw(self.kind, nbytes, self.world_size, self(nbytes)[0])[1]


def line_rate_busbw_Bps(topo: Topology, kind: str, world_size: int) -> float:
    """busbw at the roofline's line-rate time without in-switch reduction (size-free)."""
    check_collective(topo, kind, world_size)
    nbytes = 2**20
    inst = instantiate(collective_spec(kind), world_size, "pkb", {"size": nbytes})
    t_line = roofline(inst, topo).t_comm_line_rate_no_switch_reduction_s
    return algbw_busbw(kind, nbytes, world_size, t_line)[1]


def _snap(nbytes: float) -> int:
    return max(GRANULARITY_BYTES, round(nbytes / GRANULARITY_BYTES) * GRANULARITY_BYTES)


def _doubling(lo: int, hi: int) -> list[int]:
    """lo, 2 lo, 4 lo, ... and hi itself last."""
    out = [_snap(lo)]
    while out[-1] * 2 < hi:
        out.append(out[-1] * 2)
    if out[-1] < hi:
        out.append(_snap(hi))
    return out


def _bisect(lo: int, hi: int, is_high: Callable[[int], bool]) -> tuple[int, int]:
    """Narrow (lo: False, hi: True] on log-size until hi/lo <= 1 + REL_TOL or one step apart."""
    while hi > lo * (1 + REL_TOL) and hi - lo > GRANULARITY_BYTES:
        mid = _snap(math.sqrt(lo * hi))
        if mid <= lo or mid >= hi:
            mid = lo + GRANULARITY_BYTES
        if is_high(mid):
            hi = mid
        else:
            lo = mid
    return lo, hi


def _check_range(lo_bytes: int, hi_bytes: int) -> None:
    if lo_bytes < 1 or hi_bytes <= lo_bytes:
        raise UsageError(f"--sizes {lo_bytes}:{hi_bytes}: expected 1 <= low < high bytes")


Curves = dict[str, list[tuple[int, float]]]  # label -> (bytes per rank, value) on the grid
Progress = Callable[[int, int, str], None]  # (steps done, steps in all, what is being done)


def threshold(topo: Topology, kind: str, world_size: int, fraction: float,
              mechanisms: Sequence[str] | None = None, algorithm: str | None = None,
              lo_bytes: int = DEFAULT_LO_BYTES, hi_bytes: int = DEFAULT_HI_BYTES,
              curves_out: Curves | None = None, progress: Progress | None = None
              ) -> list[ThresholdResult]:
    """Per mechanism that can carry the call: the smallest size whose busbw reaches
    ``fraction`` x line rate (best algorithm per size unless ``algorithm`` is forced).
    ``curves_out`` receives each mechanism's busbw (B/s) on the doubling grid, for a plot;
    ``progress`` is told of each size of each mechanism's grid (a step), then of the end."""
    if not 0 < fraction <= 1:
        raise UsageError(f"--fraction {fraction}: expected a number in (0, 1]")
    _check_range(lo_bytes, hi_bytes)
    line = line_rate_busbw_Bps(topo, kind, world_size)
    target = fraction * line
    pairs = carriers(topo, kind, world_size, algorithm)
    names = list(mechanisms) if mechanisms else list(dict.fromkeys(m for _, m in pairs))
    mine = {mech: carriers(topo, kind, world_size, algorithm, mech) for mech in names}
    for mech, found in mine.items():
        if not found:
            raise UsageError(f"--mechanism {mech}: cannot carry {kind}"
                             + (f" with {algorithm}" if algorithm else "") + f" on {topo.name}")
    grid = _doubling(lo_bytes, hi_bytes)
    steps = _Steps(progress, len(names) * len(grid))
    out = []
    for mech in names:
        curve = CallCurve(topo, kind, world_size, mine[mech])
        out.append(_threshold_of(curve, mech, fraction, line, target, lo_bytes, hi_bytes, steps))
        if curves_out is not None:
            curves_out[mech] = [(m, curve.busbw_Bps(m)) for m in grid]
    steps.finish()
    return out


class _Steps:
    """Counts steps for a ``progress`` callback (None: counts nothing)."""

    def __init__(self, progress: Progress | None, total: int) -> None:
        self.progress, self.total, self.done = progress, total, 0

    def step(self, what: str) -> None:
        if self.progress is not None:
            self.done = min(self.done + 1, self.total)
            self.progress(self.done, self.total, what)

    def finish(self) -> None:
        if self.progress is not None:
            self.progress(self.total, self.total, "done")


def _threshold_of(curve: CallCurve, mech: str, fraction: float, line: float, target: float,
                  lo_bytes: int, hi_bytes: int, steps: _Steps | None = None
                  ) -> ThresholdResult:
    grid = _doubling(lo_bytes, hi_bytes)
    busbw = []  # the whole grid: the max is informative
    for m in grid:
        busbw.append(curve.busbw_Bps(m))
        if steps is not None:
            steps.step(f"{mech} at {m:,} B")
    first = next((i for i, bw in enumerate(busbw) if bw >= target), None)
    reached = grid[first] if first is not None else None
    if first:
        reached = _bisect(grid[first - 1], grid[first], lambda m: curve.busbw_Bps(m) >= target)[1]
    seen = {m: curve.busbw_Bps(m) for m in curve.seen}
    peak = max(seen, key=lambda m: (seen[m], -m))
    return ThresholdResult(
        mechanism=mech, fraction=fraction, line_rate_busbw_GBps=line / GB,
        target_busbw_GBps=target / GB, size_bytes=reached,
        algorithm=curve(reached)[1].split("/")[0] if reached is not None else None,
        busbw_at_size_GBps=seen[reached] / GB if reached is not None else None,
        max_busbw_GBps=seen[peak] / GB, max_busbw_at_bytes=peak)


def contenders(topo: Topology, kind: str, world_size: int, mode: str
               ) -> tuple[list[Contender], list[str]]:
    """A mode's contenders that can carry the call, and the skipped ones (with why)."""
    if mode not in MODES:
        raise UsageError(f"--mode {mode}: expected one of " + ", ".join(MODES))
    pairs = carriers(topo, kind, world_size)
    if mode == "mechanisms":
        found = [Contender(mechanism=m) for m in MECHANISM_CONTENDERS
                 if any(pm == m for _, pm in pairs)]
        skipped = [f"{m}: " + ("not on " + topo.name if m not in topo.mechanisms
                               else f"cannot carry {kind}")
                   for m in MECHANISM_CONTENDERS if Contender(mechanism=m) not in found]
        return found, skipped
    algs = list(dict.fromkeys(a for a, _ in pairs))
    return [Contender(algorithm=a) for a in algs], []


def crossovers(topo: Topology, kind: str, world_size: int,
               contenders_or_mode: Sequence[Contender] | str,
               lo_bytes: int = DEFAULT_LO_BYTES, hi_bytes: int = DEFAULT_HI_BYTES,
               curves_out: Curves | None = None, progress: Progress | None = None
               ) -> list[Crossover]:
    """Sizes in [lo, hi] where the fastest contender changes, ascending. Winners are compared
    on a doubling grid; a change inside one octave is bisected (two changes within one octave
    may hide each other). ``curves_out`` receives each contender's time (s) on the grid;
    ``progress`` is told of each octave of the grid (a step), then of the end."""
    _check_range(lo_bytes, hi_bytes)
    chosen = (contenders(topo, kind, world_size, contenders_or_mode)[0]
              if isinstance(contenders_or_mode, str) else list(contenders_or_mode))
    if len(chosen) < 2:
        raise UsageError(f"crossover: fewer than two contenders can carry {kind} on "
                         f"{topo.name} ({', '.join(c.label for c in chosen) or 'none'})")
    curves = []
    for c in chosen:
        pairs = carriers(topo, kind, world_size, c.algorithm, c.mechanism)
        if not pairs:
            raise UsageError(f"--contender {c.label}: cannot carry {kind} on {topo.name}")
        curves.append(CallCurve(topo, kind, world_size, pairs))

    def winner(m: int) -> int:
        return min(range(len(curves)), key=lambda i: (curves[i](m)[0], i))

    out: list[Crossover] = []
    grid = _doubling(lo_bytes, hi_bytes)
    steps = _Steps(progress, len(grid) - 1)
    for left, right in itertools.pairwise(grid):
        steps.step(f"{left:,} to {right:,} B")
        start = left
        while winner(start) != winner(right):
            w = winner(start)
            lo, hi = _bisect(start, right, lambda m, w=w: winner(m) != w)  # type: ignore[misc]
            a, b = curves[w], curves[winner(hi)]
            out.append(Crossover(hi, lo, chosen[w].label, chosen[winner(hi)].label,
                                 a(lo)[1], b(hi)[1], a(hi)[0] / US, b(hi)[0] / US))
            start = hi
    if curves_out is not None:
        for c, curve in zip(chosen, curves, strict=True):
            curves_out[c.label] = [(m, curve(m)[0]) for m in grid]
    steps.finish()
    return out
