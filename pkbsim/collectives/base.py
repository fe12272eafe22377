"""The interface every collective algorithm implements, and the registry.

An algorithm turns (collective kind, group size n, bytes m, root) into flows of bytes between
group-local ranks, plus flows into and out of the NVSwitch for in-switch reduction and
multicast, and says how many synchronisation steps it needs. The roofline and the simulator
route those flows over a topology's links.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

SWITCH = -1  # flow endpoint: the NVSwitch itself (multicast / in-switch reduction)
MAX_PIPELINE_CHUNKS = 32  # pieces one call's buffer is cut into at most

# A rank's program, as the simulator runs it, is a sequence of primitives (plain tuples, as
# they are made by the million):
#   (SEND, srcs, dsts, nbytes, tag)  move nbytes from every src to every dst (one rank each for
#       point to point; several through the switch for multicast / in-switch reduction); the
#       issuing rank waits until the bytes have left. The data is usable at each dst one step
#       latency later, under the key (tag, dst).
#   (BATCH, ((srcs, dsts, nbytes, tag), ...))  start several sends at once; wait for all.
#   (RECV, tag)  wait until data tagged ``tag`` has arrived at this rank.
#   (WAITALL, (tag, ...))  wait for several arrivals.
SEND, BATCH, RECV, WAITALL = 0, 1, 2, 3
Prim = tuple[Any, ...]


@dataclass(frozen=True)
class Flow:
    """``nbytes`` from group rank ``src`` to group rank ``dst`` (either may be SWITCH)."""

    src: int
    dst: int
    nbytes: float
    phase: str = "main"  # hierarchical algorithms: "intra" or "inter"


@dataclass(frozen=True)
class Shift:
    """A relabelling of a group's ranks, placed node by node (``g`` ranks on each of ``k``
    nodes): node x becomes node x + ``nodes`` and local rank l becomes l + ``locals`` (both
    modulo). The symmetric simulation (pkbsim/symmetry.py) runs one rank per class of ranks
    that such shifts map onto each other."""

    nodes: int
    locals: int
    k: int
    g: int

    def rank(self, rank: int) -> int:
        if rank == SWITCH:
            return rank
        x, local = divmod(rank, self.g)
        return (x + self.nodes) % self.k * self.g + (local + self.locals) % self.g


def shape(ctx: Context) -> tuple[int, int] | None:
    """(nodes k, ranks per node g) of a group placed node by node; None when its nodes hold
    different numbers of its ranks."""
    if ctx.nodes > 1:
        return (ctx.nodes, ctx.per_node) if ctx.per_node > 0 else None
    return 1, ctx.n


@dataclass(frozen=True)
class Context:
    """What an algorithm needs to know about where the group's ranks sit."""

    n: int  # group size
    root: int = 0
    pattern: str | None = None  # send_recv
    nodes: int = 1  # nodes the group spans
    per_node: int = 0  # group ranks per node (hierarchical algorithms); 0 = n


class Algorithm(ABC):
    """One way to carry out one or more collective kinds."""

    name: str = ""
    kinds: tuple[str, ...] = ()
    needs_switch_reduction = False  # NVLS: multimem.ld_reduce
    needs_multicast = False  # multimem.st / multicast writes
    needs_network_reduction = False  # the network's switches reduce (SHARP)
    hierarchical = False  # only for groups spanning several nodes
    summary = ""

    @abstractmethod
    def flows(self, kind: str, m: float, ctx: Context) -> list[Flow]:
        """Bytes moved, per (src, dst) pair, for one call with a buffer of ``m`` bytes."""

    def flows_from(self, kind: str, m: float, ctx: Context, sources: set[int]) -> list[Flow]:
        """The flows of ``flows`` that leave one of ``sources`` (a flow from the switch: that
        reach one), in the same order; dense algorithms make only these."""
        return [f for f in self.flows(kind, m, ctx)
                if (f.dst if f.src == SWITCH else f.src) in sources]

    @abstractmethod
    def steps(self, kind: str, ctx: Context) -> int:
        """Synchronisation steps on the critical path (0 if nothing moves)."""

    @abstractmethod
    def program(self, kind: str, m: float, ctx: Context, rank: int, chunks: int,
                channel: int = 0) -> Iterator[Prim]:
        """Group rank ``rank``'s primitives on ``channel`` for one call, the buffer split into
        ``chunks`` pipelined pieces. Over all ranks and channels the bytes equal ``flows``."""

    def channels(self, kind: str, ctx: Context) -> int:
        """Independent programs each rank runs side by side (e.g. one per tree)."""
        return 1

    def symmetry(self, kind: str, ctx: Context) -> tuple[int, int] | None:
        """(node step, local step): the shifts by multiples of these (:class:`Shift`) map every
        rank's programs, as a set over its channels, onto its image's, with ranks and tags
        relabelled (``relabel``); a step equal to the group's node count k (ranks per node g)
        allows no shift in that direction. None: no shift but the identity (rooted kinds,
        trees of ranks). tests/collectives/test_symmetry.py checks every declaration."""
        return None

    def moves_channels(self, kind: str, ctx: Context) -> bool:
        """Whether a local shift maps a rank's channel c onto another channel of its image
        (one channel per NIC rail): the order in which a rank starts its channels then differs
        between a rank and its image, which matters where sends queue for copy engines."""
        return False

    def relabel(self, tag: Any, shift: Shift) -> Any:
        """A tag as the image of its rank under ``shift`` names it. By default the tag's last
        element is the rank that sends the message (or, for a load, the rank that issues it)."""
        return (*tag[:-1], shift.rank(tag[-1]))

    def pipelined_bytes(self, kind: str, m: float, n: int) -> float | None:
        """The bytes each step waits for in full, where its steps depend on each other
        (chains, trees, NVLS, two-shot, hierarchical) and cutting them into chunks pipelines
        the call; None where nothing waits (rings, direct sends)."""
        return None

    def pipeline_chunks(self, kind: str, m: float, n: int, chunk_bytes: float) -> int:
        """Pieces one call of ``m`` bytes over ``n`` ranks is cut into at ``chunk_bytes``."""
        size = self.pipelined_bytes(kind, m, n)
        if size is None:
            return 1
        return max(1, min(math.ceil(size / chunk_bytes), MAX_PIPELINE_CHUNKS))

    def applies(self, kind: str, ctx: Context) -> bool:
        if kind not in self.kinds:
            return False
        if self.hierarchical:
            return ctx.nodes > 1 and ctx.per_node > 1
        return True


ALGORITHMS: dict[str, Algorithm] = {}


def register(cls: type[Algorithm]) -> type[Algorithm]:
    """Class decorator: add one instance of ``cls`` to the registry under its name."""
    if cls.name in ALGORITHMS:
        raise ValueError(f"algorithm {cls.name!r} registered twice")
    ALGORITHMS[cls.name] = cls()
    return cls


def algorithms_for(kind: str, ctx: Context) -> list[Algorithm]:
    return [a for a in ALGORITHMS.values() if a.applies(kind, ctx)]
