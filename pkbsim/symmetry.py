"""Classes of equivalent ranks: simulate one rank per class, stand for the others.

Ranks sit node by node, ``g`` on each of ``k`` nodes. A shift (pkbsim.collectives.base.Shift)
moves node x to x + a and local rank l to l + b. When shifts by multiples of ``node_step`` nodes
and ``local_step`` local ranks map the machine, every op's placement and every collective call's
programs onto themselves, ranks that such a shift maps onto each other do the same thing at the
same time: the simulation runs only the representatives (node x < node_step, local rank l <
local_step), and the others are their images:

* a message sent to an image arrives at its representative, its tag relabelled by the
  algorithm (``Algorithm.relabel``), at the same instant;
* an image has entered a call when its representative has;
* a link that belongs to an image (its NVLink, NIC, HBM, SMs) is its representative's link, and
  one that belongs to a node (its uplink) its representative node's, a flow crossing it weighted
  by the ranks it stands for per node (class size / node class size = g / local_step); as the
  shifts act freely on ranks, a rank's own link needs no weight. Max-min fair rates are
  constant on the classes, so each representative flow gets the rate of the flows it stands for.

The steps are found per simulation (:func:`find`): the topology allows local shifts only on an
NVSwitch (PCIe switches and sockets tell GPUs apart); a compute op must run on whole classes;
a collective over the whole world allows its algorithm's declared shifts
(``Algorithm.symmetry``, checked against the programs by tests/collectives/test_symmetry.py),
one over smaller groups those that map its groups onto each other in order. Where no shift is
left, the full simulation runs (``Classes.reason`` says why). docs/simulation.md, "Symmetric
simulation".
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pkbsim.collectives.base import Algorithm, Shift
from pkbsim.task.schema import CommOp, ComputeOp
from pkbsim.topology.schema import Topology

_OWNED = re.compile(r"^(gpu|node)(\d+)\.(.*)$")


class Asymmetric(Exception):
    """A call met while building needs coarser steps (or none): build again."""

    def __init__(self, node_step: int, local_step: int, why: str) -> None:
        super().__init__(why)
        self.node_step = node_step
        self.local_step = local_step
        self.why = why


@dataclass
class Classes:
    """The representatives of a simulation of ``world_size`` ranks and how the others map onto
    them. ``node_step == k`` and ``local_step == g`` is the full simulation."""

    world_size: int
    k: int
    g: int
    node_step: int
    local_step: int
    reason: str = ""  # why the full simulation runs (or why the steps are what they are)
    _links: dict[str, tuple[str, float]] = field(default_factory=dict, repr=False)

    @property
    def symmetric(self) -> bool:
        return self.node_step * self.local_step < self.world_size

    @property
    def ranks(self) -> list[int]:
        """The simulated ranks (every rank on the full path), in order."""
        return [x * self.g + local for x in range(self.node_step)
                for local in range(self.local_step)]

    @property
    def class_size(self) -> int:
        return self.world_size // (self.node_step * self.local_step)

    def rep(self, rank: int) -> int:
        x, local = divmod(rank, self.g)
        return x % self.node_step * self.g + local % self.local_step

    def to_rep(self, rank: int) -> Shift:
        """The shift that maps ``rank`` onto its representative."""
        x, local = divmod(rank, self.g)
        return Shift(-(x - x % self.node_step) % self.k, -(local - local % self.local_step)
                     % self.g, self.k, self.g)

    def members(self, rep: int) -> Iterable[int]:
        """Every rank ``rep`` stands for (itself included)."""
        x0, l0 = divmod(rep, self.g)
        for x in range(x0, self.k, self.node_step):
            for local in range(l0, self.g, self.local_step):
                yield x * self.g + local

    def link(self, link_id: str) -> tuple[str, float]:
        """(the representative link of ``link_id``, the weight of a representative flow on it
        per crossing of ``link_id``)."""
        found = self._links.get(link_id)
        if found is None:
            m = _OWNED.match(link_id)
            if m is None:  # a link of the whole machine: every class crosses the same one
                found = (link_id, float(self.class_size))
            elif m.group(1) == "gpu":
                found = (f"gpu{self.rep(int(m.group(2)))}.{m.group(3)}", 1.0)
            else:
                found = (f"node{int(m.group(2)) % self.node_step}.{m.group(3)}",
                         self.g / self.local_step)
            self._links[link_id] = found
        return found

    def link_members(self, link_id: str) -> list[str]:
        """Every link a representative link stands for (itself included)."""
        m = _OWNED.match(link_id)
        if m is None:
            return [link_id]
        owner, rest = int(m.group(2)), m.group(3)
        if m.group(1) == "gpu":
            return [f"gpu{r}.{rest}" for r in self.members(owner)]
        return [f"node{x}.{rest}" for x in range(owner, self.k, self.node_step)]

    def describe(self) -> str:
        if not self.symmetric:
            return f"full: {self.world_size:,} ranks simulated ({self.reason})"
        return (f"symmetric: {self.node_step * self.local_step:,} of {self.world_size:,} ranks "
                f"simulated, each standing for {self.class_size:,} ({self.reason})")


def full(world_size: int, reason: str) -> Classes:
    return Classes(world_size, 1, world_size, 1, world_size, reason)


def start(topo: Topology, world_size: int, enabled: bool = True) -> Classes:
    """The steps the machine allows before any op is looked at."""
    if not enabled:
        return full(world_size, "symmetry turned off")
    gpn = topo.gpus_per_node
    if world_size <= gpn:
        k, g = 1, world_size
    elif world_size % gpn:
        return full(world_size, "the last node is partly used")
    else:
        k, g = world_size // gpn, gpn
    local = 1 if topo.scale_up.fabric == "nvswitch" else g
    why = ("node and local shifts" if local == 1
           else "node shifts (GPUs behind PCIe switches differ)")
    return Classes(world_size, k, g, 1, local, why)


def coarser(steps: int, total: int, ok: Callable[[int], bool]) -> int:
    """The smallest multiple of ``steps`` dividing ``total`` for which ``ok`` holds (``total``
    itself, no shift, always does)."""
    for step in range(steps, total, steps):
        if total % step == 0 and ok(step):
            return step
    return total


def restrict(classes: Classes, node_step: int, local_step: int, why: str) -> Classes:
    """``classes`` with its steps made multiples of these."""
    ns = math.lcm(classes.node_step, node_step)
    ls = math.lcm(classes.local_step, local_step)
    ns = ns if classes.k % ns == 0 else classes.k
    ls = ls if classes.g % ls == 0 else classes.g
    if (ns, ls) == (classes.node_step, classes.local_step):
        return classes
    reason = why if ns * ls >= classes.world_size else f"{classes.reason}; {why}"
    return Classes(classes.world_size, classes.k, classes.g, ns, ls, reason)


def _invariant(classes: Classes, keep: Callable[[Shift], bool]) -> Classes:
    """Coarsen the node step, then the local step, until ``keep`` holds for both generators."""
    k, g = classes.k, classes.g
    ns = coarser(classes.node_step, k, lambda s: keep(Shift(s % k, 0, k, g)))
    ls = coarser(classes.local_step, g, lambda s: keep(Shift(0, s % g, k, g)))
    return Classes(classes.world_size, k, g, ns, ls, classes.reason)


def for_compute(classes: Classes, ops: Sequence[CommOp | ComputeOp]) -> Classes:
    """Steps under which every compute op runs on whole classes."""
    w = classes.world_size
    for op in ops:
        if not isinstance(op, ComputeOp) or op.repeat == 0 or not classes.symmetric:
            continue
        runs = [op.runs_on(r) for r in range(w)]
        if all(runs):
            continue
        found = _invariant(classes, lambda s, runs=runs: all(  # type: ignore[misc]
            runs[r] == runs[s.rank(r)] for r in range(w)))
        classes = restrict(classes, found.node_step, found.local_step,
                           f"op {op.id} runs on some ranks only")
    return classes


def call_steps(classes: Classes, alg: Algorithm, kind: str, ctx: Any,
               groups: list[list[int]], queued: bool = False) -> tuple[int, int, str] | None:
    """The steps (node, local) a call over ``groups`` needs, or None where ``classes`` already
    allow it: over the whole world the algorithm's declared shifts, over smaller groups the
    shifts that map its groups onto each other in order. ``queued``: its sends queue for the
    GPUs' copy engines in the order each rank starts its channels, so a shift that moves
    channels (``Algorithm.moves_channels``) changes which send waits: no local shift."""
    k, g, w = classes.k, classes.g, classes.world_size
    if len(groups) == 1 and groups[0] == list(range(w)):
        steps = alg.symmetry(kind, ctx)
        if steps is None:
            return k, g, f"{alg.name} {kind} has no symmetry (rooted, or a tree of ranks)"
        ns, ls = steps
        what = f"{alg.name} {kind}"
        if queued and alg.moves_channels(kind, ctx):
            ls, what = g, f"{what} on copy engines (its rails queue in another order)"
        if classes.node_step % ns == 0 and classes.local_step % ls == 0:
            return None
        return ns, ls, f"{what} allows {_shifts(ns, ls, k, g)}"
    index = {tuple(m): i for i, m in enumerate(groups)}

    def maps(shift: Shift) -> bool:
        return all(tuple(shift.rank(r) for r in m) in index for m in groups)

    if maps(Shift(classes.node_step % k, 0, k, g)) and maps(Shift(0, classes.local_step % g,
                                                                   k, g)):
        return None
    ns = coarser(classes.node_step, k, lambda s: maps(Shift(s % k, 0, k, g)))
    ls = coarser(classes.local_step, g, lambda s: maps(Shift(0, s % g, k, g)))
    return ns, ls, (f"its groups of {len(groups[0])} ranks map onto each other under "
                    f"{_shifts(ns, ls, k, g)}")


def _shifts(ns: int, ls: int, k: int, g: int) -> str:
    node = f"node shifts by {ns}" if ns < k else "no node shift"
    local = f"local shifts by {ls}" if ls < g else "no local shift"
    return f"{node} and {local}"
