"""A reference program at an untraced point, derived from traced ones (pure, no torch).

Each traced program is unrolled into its segments, and each segment gets a *signature*: how
it ends (collective name and whether its group is the whole world, sync, end), the host classes
it issues and the kernel kinds it launches; sizes are left out. The signatures of the point
with the most segments are compressed into a *template*: runs of segments plus loops (a body
of segments repeated, found as the longest tandem repeat). Every point used must parse with
that template; a loop may run a different number of times at each point (a chunk loop grows
in iterations, not in bytes per operator).

Along each parameter that differs from the base point (``W`` or a task parameter), every
quantity of the template is fitted over the series of points that differ from the base only
in that parameter: a loop's iteration count; per segment, the operators of each host class;
per kernel group (matched by kind and rank of size), its bytes and FLOPs (its count where the
groups differ between points); a collective's bytes and group size. Each fit is linear
(``a + b x``) or a power law (``c x^p``), whichever is closer at the points; the value at the
request is the base point's, moved along each parameter by its fit (by a difference for
linear fits, by a ratio for power laws).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

from pkbsim.trace.classes import HOST_CLASSES
from pkbsim.trace.format import Collective
from pkbsim.trace.program import KernelGroup, Program, Segment

LONGEST_BODY = 64  # segments in one loop body, at most
Coords = tuple[tuple[str, float], ...]  # ("W", 8.0), ("M", 2048.0), ...


# ------------------------------------------------------------------ fits

@dataclass(frozen=True)
class Fit:
    model: str  # const | linear | power
    slope: float = 0.0  # b of a + b x, or p of c x^p

    def move(self, y: float, x_from: float, x_to: float) -> float:
        """``y`` at ``x_from`` carried to ``x_to`` along the fitted curve."""
        if self.model == "linear":
            return y + self.slope * (x_to - x_from)
        if self.model == "power":
            return float(y * (x_to / x_from) ** self.slope)
        return y


def fit(xs: Sequence[float], ys: Sequence[float]) -> Fit:
    """Least squares of a line and of a power law (in log-log) through the points; the one
    with the smaller error relative to the largest value (a tie goes to the power law)."""
    if len(xs) < 2 or max(ys) - min(ys) <= 1e-12 * max(abs(y) for y in ys):
        return Fit("const")
    scale = max(abs(y) for y in ys)
    slope = _slope(xs, ys)
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    lin_err = sum(((my + slope * (x - mx)) - y) ** 2 for x, y in zip(xs, ys, strict=True))
    best = Fit("linear", slope)
    if min(ys) > 0 and min(xs) > 0:
        lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
        p = _slope(lx, ly)
        c = sum(ly) / len(ly) - p * sum(lx) / len(lx)
        pow_err = sum((math.exp(c + p * a) - y) ** 2 for a, y in zip(lx, ys, strict=True))
        if pow_err / scale ** 2 <= lin_err / scale ** 2 * (1 + 1e-9) + 1e-18:
            best = Fit("power", p)
    return best


def _slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    var = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var if var else 0.0


# ------------------------------------------------------------------ structure

def signature(seg: Segment, world_size: int) -> tuple[object, ...]:
    coll = seg.collective
    return (seg.end, coll.name if coll else "",
            coll is not None and coll.group_size == world_size,
            tuple(c for c, n in seg.host if n),
            tuple(sorted({(k.kind, k.tensor_core) for k in seg.kernels if k.count})))


def unrolled(program: Program) -> list[Segment]:
    return [replace(seg, times=1) for seg in program.segments for _ in range(seg.times)]


Item = tuple[str, str]  # ("run", tokens) or ("loop", body tokens)


def template_of(tokens: str) -> tuple[Item, ...]:
    """Runs and loops: the longest tandem repeat (ties: the shortest body) becomes a loop, and
    the parts before and after it are compressed the same way."""
    if len(tokens) < 2:
        return (("run", tokens),) if tokens else ()
    best: tuple[int, int, int, int] | None = None  # covered, -body, start, repeats
    for body in range(1, min(LONGEST_BODY, len(tokens) // 2) + 1):
        for m in _repeats(body).finditer(tokens):
            covered = m.end() - m.start()
            cand = (covered, -body, m.start(), covered // body)
            if best is None or cand[:2] > best[:2]:
                best = cand
    if best is None:
        return (("run", tokens),)
    covered, neg_body, start, _ = best
    body = -neg_body
    return (*template_of(tokens[:start]), ("loop", tokens[start:start + body]),
            *template_of(tokens[start + covered:]))


@lru_cache(maxsize=LONGEST_BODY)
def _repeats(body: int) -> re.Pattern[str]:
    return re.compile(r"(.{" + str(body) + r"})\1+", re.S)


def parse(template: tuple[Item, ...], tokens: str) -> list[int] | None:
    """The number of times each loop of ``template`` runs in ``tokens``, or None when they do
    not fit the template."""
    pattern = "".join(re.escape(t) if kind == "run" else f"((?:{re.escape(t)})*)"
                      for kind, t in template)
    m = re.fullmatch(pattern, tokens, re.S)
    if m is None:
        return None
    bodies = [t for kind, t in template if kind == "loop"]
    return [len(m.group(i + 1)) // len(b) for i, b in enumerate(bodies)]


# ------------------------------------------------------------------ one slot's numbers

@dataclass(frozen=True)
class Slot:
    """One template position at one point: a segment, or the mean of a loop body's segment
    over the loop's iterations."""

    host: dict[str, float]
    kernels: dict[tuple[str, bool], tuple[tuple[float, float, float], ...]]  # (bytes, flops, n)
    end: str  # collective | sync | end
    collective: Collective | None
    world: bool  # the collective's group is the whole world


def slot_of(segs: Sequence[Segment], world_size: int) -> Slot:
    host = {c: sum(s.host_count(c) for s in segs) / len(segs) for c in HOST_CLASSES}
    per_kind: dict[tuple[str, bool], list[tuple[tuple[float, float, float], ...]]] = {}
    for s in segs:
        mine: dict[tuple[str, bool], list[tuple[float, float, float]]] = {}
        for k in s.kernels:
            mine.setdefault((k.kind, k.tensor_core), []).append((k.bytes, k.flops, k.count))
        for key, groups in mine.items():
            per_kind.setdefault(key, []).append(tuple(sorted(groups)))
    kernels = {key: _mean_groups(lists, len(segs)) for key, lists in per_kind.items()}
    first = segs[0].collective
    coll = None
    if first is not None:
        coll = replace(first, bytes=round(sum(s.collective.bytes for s in segs
                                              if s.collective is not None) / len(segs)))
    return Slot(host, kernels, segs[0].end, coll,
                first is not None and first.group_size == world_size)


def _mean_groups(lists: list[tuple[tuple[float, float, float], ...]], n: int
                 ) -> tuple[tuple[float, float, float], ...]:
    """Kernel groups of one kind over ``n`` segments: group by group where every segment has
    the same counts, else one group of the mean count and mean size."""
    profile = {tuple(g[2] for g in groups) for groups in lists}
    if len(lists) == n and len(profile) == 1:
        return tuple((sum(groups[i][0] for groups in lists) / n,
                      sum(groups[i][1] for groups in lists) / n, lists[0][i][2])
                     for i in range(len(lists[0])))
    return (_aggregate([g for groups in lists for g in groups], n),)


def _aggregate(groups: Sequence[tuple[float, float, float]], n: int
               ) -> tuple[float, float, float]:
    count = sum(g[2] for g in groups)
    if count <= 0:
        return (0.0, 0.0, 0.0)
    return (sum(g[0] * g[2] for g in groups) / count, sum(g[1] * g[2] for g in groups) / count,
            count / n)


# ------------------------------------------------------------------ derivation

@dataclass(frozen=True)
class Traced:
    """A traced point as the derivation sees it."""

    coords: Coords  # ("W", w) first, then the task parameters the point was traced at
    world_size: int
    program: Program


@dataclass(frozen=True)
class Derived:
    program: Program
    used: tuple[Traced, ...]  # base first


Series = dict[str, list[int]]  # axis -> indexes into the points used (base included)


def derive(base: Traced, series: dict[str, list[Traced]], target: Coords) -> Derived | None:
    """The program at ``target`` from ``base`` and, per axis where they differ, the points
    along it (base included); None when the points' structures do not fit one template or an
    axis keeps fewer than 3 points that do."""
    used = [base, *{id(p): p for ps in series.values() for p in ps if p is not base}.values()]
    flat = [unrolled(p.program) for p in used]
    alphabet: dict[tuple[object, ...], str] = {}
    tokens = ["".join(alphabet.setdefault(signature(s, p.world_size),
                                          chr(0xE000 + len(alphabet))) for s in segs)
              for p, segs in zip(used, flat, strict=True)]
    order = sorted(range(len(used)), key=lambda i: -len(tokens[i]))
    for i in order:
        template = template_of(tokens[i])
        counts = [parse(template, t) for t in tokens]
        if counts[0] is None:
            continue
        fits_ok = {ax: [p for p in ps if counts[used.index(p)] is not None]
                   for ax, ps in series.items()}
        if any(len({dict(p.coords)[ax] for p in ps}) < 3 for ax, ps in fits_ok.items()):
            continue
        return Derived(_build(template, used, flat, counts, fits_ok, target),
                       tuple(p for p, c in zip(used, counts, strict=True) if c is not None))
    return None


def _build(template: tuple[Item, ...], used: list[Traced], flat: list[list[Segment]],
           counts: list[list[int] | None], series: dict[str, list[Traced]],
           target: Coords) -> Program:
    slots: list[dict[int, Slot]] = []  # per template slot: point index -> its numbers
    loops: list[dict[int, float]] = []  # per loop: point index -> iterations
    layout: list[tuple[int, int]] = []  # per template item: (first slot, loop index or -1)
    for item_index, (kind, toks) in enumerate(template):
        first = len(slots)
        loop = -1 if kind == "run" else len(loops)
        if kind == "loop":
            loops.append({})
        slots.extend({} for _ in toks)
        layout.append((first, loop))
        for j, (p, segs, cs) in enumerate(zip(used, flat, counts, strict=True)):
            if cs is None:
                continue
            start = _offset(template, cs, item_index)
            if kind == "run":
                for pos in range(len(toks)):
                    slots[first + pos][j] = slot_of([segs[start + pos]], p.world_size)
                continue
            n = cs[loop]
            loops[loop][j] = float(n)
            for pos in range(len(toks)):
                body = [segs[start + it * len(toks) + pos] for it in range(n)]
                if body:
                    slots[first + pos][j] = slot_of(body, p.world_size)
    mover = _Mover(used, series, target)
    w_target = int(dict(target)["W"])
    segments: list[Segment] = []
    for (kind, toks), (first, loop) in zip(template, layout, strict=True):
        made = [_segment(slots[first + pos], mover, w_target) for pos in range(len(toks))]
        times = 1 if kind == "run" else max(0, round(mover.move(loops[loop])))
        for _ in range(times):
            segments.extend(s for s in made if s is not None)
    return Program(tuple(_refold(segments)), {"derived": True})


def _offset(template: tuple[Item, ...], counts: list[int], upto: int) -> int:
    at, loop = 0, 0
    for kind, toks in template[:upto]:
        if kind == "run":
            at += len(toks)
        else:
            at += len(toks) * counts[loop]
            loop += 1
    return at


class _Mover:
    """Carries one quantity from the base (or the nearest point that has it) to the target,
    axis by axis, along fits over each axis's points."""

    def __init__(self, used: list[Traced], series: dict[str, list[Traced]],
                 target: Coords) -> None:
        self.used, self.target = used, dict(target)
        self.series = {ax: [used.index(p) for p in ps] for ax, ps in series.items()}

    def move(self, values: dict[int, float]) -> float:
        anchor = 0 if 0 in values else min(values, key=self._distance)
        where = dict(self.used[anchor].coords)
        y = values[anchor]
        for ax, idx in self.series.items():
            have = [i for i in idx if i in values]
            xs = [dict(self.used[i].coords)[ax] for i in have]
            if len(set(xs)) < 2:
                continue
            f = fit(xs, [values[i] for i in have])
            if f.model == "power" and where[ax] <= 0:
                continue
            y = f.move(y, where[ax], self.target[ax])
        return max(0.0, y)

    def _distance(self, i: int) -> float:
        return sum(abs(math.log(max(v, 1e-9) / max(self.target.get(k, v), 1e-9)))
                   for k, v in self.used[i].coords)


def _segment(points: dict[int, Slot], mover: _Mover, w_target: int) -> Segment | None:
    if not points:
        return None
    any_slot = next(iter(points.values()))
    host = tuple((c, round(mover.move({j: s.host[c] for j, s in points.items()}), 6))
                 for c in HOST_CLASSES if any(s.host[c] for s in points.values()))
    kernels: list[KernelGroup] = []
    for key in sorted({k for s in points.values() for k in s.kernels}):
        lists = {j: s.kernels.get(key, ()) for j, s in points.items()}
        shapes = {tuple(g[2] for g in groups) for groups in lists.values()}
        if len(shapes) == 1:  # the same groups everywhere: each group on its own
            for g in range(len(next(iter(lists.values())))):
                kernels.append(KernelGroup(
                    key[0], key[1], mover.move({j: gs[g][0] for j, gs in lists.items()}),
                    mover.move({j: gs[g][1] for j, gs in lists.items()}),
                    next(iter(lists.values()))[g][2]))
            continue
        agg = {j: _aggregate(gs, 1) for j, gs in lists.items()}
        count = mover.move({j: a[2] for j, a in agg.items()})
        if count > 0:
            kernels.append(KernelGroup(key[0], key[1],
                                       mover.move({j: a[0] for j, a in agg.items() if a[2]}),
                                       mover.move({j: a[1] for j, a in agg.items() if a[2]}),
                                       count))
    coll = any_slot.collective
    if coll is not None:
        nbytes = round(mover.move({j: float(s.collective.bytes) for j, s in points.items()
                                   if s.collective is not None}))
        if any_slot.world:
            size = w_target
        else:
            raw = mover.move({j: float(s.collective.group_size) for j, s in points.items()
                              if s.collective is not None})
            size = _nearest_divisor(w_target, raw)
        coll = Collective(coll.name, size, nbytes)
    return Segment(host, tuple(k for k in kernels if k.count > 0), any_slot.end, coll)


def _nearest_divisor(w: int, x: float) -> int:
    return min((d for d in range(1, w + 1) if w % d == 0), key=lambda d: (abs(d - x), d))


def _refold(segments: list[Segment]) -> list[Segment]:
    out: list[Segment] = []
    for seg in segments:
        if out and (out[-1].host, out[-1].kernels, out[-1].end, out[-1].collective) == (
                seg.host, seg.kernels, seg.end, seg.collective):
            out[-1] = replace(out[-1], times=out[-1].times + 1)
        else:
            out.append(seg)
    return out


def describe_points(points: Sequence[Traced]) -> str:
    """``W = 1, 2, 4: M=1024; W = 8: M=1024, 2048, 4096`` (grouped by world size, then by
    the parameters that stay fixed)."""
    by_w: dict[int, list[Coords]] = {}
    for p in points:
        sets = tuple((k, v) for k, v in p.coords if k != "W")
        if sets not in by_w.setdefault(p.world_size, []):
            by_w[p.world_size].append(sets)
    texts: dict[str, list[int]] = {}  # the sets' text -> world sizes with exactly those
    for w in sorted(by_w):
        texts.setdefault(_sets_text(sorted(by_w[w])), []).append(w)
    return "; ".join(f"W = {', '.join(map(str, ws))}" + (f": {t}" if t else "")
                     for t, ws in texts.items())


def _sets_text(sets: list[Coords]) -> str:
    """``M=1024, 2048, 4096`` where one parameter varies, else each point in full."""
    if not sets or not sets[0]:
        return ""
    keys = [k for k, _ in sets[0]]
    varying = [k for k in keys if len({dict(s)[k] for s in sets}) > 1]
    if len(varying) == 1 and all(tuple(k for k, _ in s) == tuple(keys) for s in sets):
        fixed = " ".join(f"{k}={v:g}" for k, v in sets[0] if k not in varying)
        values = ", ".join(f"{dict(s)[varying[0]]:g}" for s in sets)
        return f"{varying[0]}={values}" + (f" ({fixed})" if fixed else "")
    return ", ".join(" ".join(f"{k}={v:g}" for k, v in s) for s in sets)
