"""The algorithms the roofline and the simulator consider. Traffic formulas: docs/metrics.md.

Each class gives the bytes one call moves (``flows``, for the roofline), its synchronisation
steps, and each rank's program of sends and receives (``program``, for the simulator). Over all
ranks and channels a program moves exactly the bytes of ``flows``; tests check that.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any

from pkbsim.collectives.base import (
    ALGORITHMS,
    BATCH,
    RECV,
    SEND,
    SWITCH,
    WAITALL,
    Algorithm,
    Context,
    Flow,
    Prim,
    Shift,
    register,
    shape,
)

ROOTED = ("broadcast", "reduce", "scatter", "gather")


def flat_symmetry(kind: str, ctx: Context) -> tuple[int, int] | None:
    """Programs over ranks 0..n-1 in order, each rank's peers counted from itself (me + 1,
    me + 2, ...): every translation of the ranks maps them onto each other, so inside one node
    any local shift and across nodes any node shift (a translation by whole nodes)."""
    if kind in ROOTED:
        return None
    found = shape(ctx)
    if found is None:
        return None
    k, g = found
    return (1, 1) if k == 1 else (1, g)


def _pairs(n: int) -> list[tuple[int, int]]:
    return [(i, j) for i in range(n) for j in range(n) if i != j]


def _others(me: int, n: int) -> list[int]:
    """The other ranks from ``me``'s point of view: me + 1, me + 2, ... (mod n), so that ranks
    issuing one at a time (copy engines, queued sends) do not all start on the same peer."""
    return [(me + k) % n for k in range(1, n)]


def _exchange(me: int, peers: list[int], nbytes: float, tag: object) -> Phase:
    """A phase where ``me`` sends ``nbytes`` to each peer and receives as much from each."""
    sends = tuple(((me,), (p,), nbytes, (tag, me)) for p in peers)
    return sends, tuple((tag, p) for p in peers)


Phase = tuple[tuple[tuple[object, ...], ...], tuple[object, ...]]  # (sends, tags to receive)


def _pipelined(phases: Callable[[int], list[Phase]], nphases: int, chunks: int,
               channel: int) -> Iterator[Prim]:
    """Run ``nphases`` dependent phases over ``chunks`` pieces as a software pipeline: channel
    p sends phase p of each chunk as soon as phase p-1 of that chunk has arrived here, so
    different phases of different chunks overlap; channel ``nphases`` collects the last phase.
    ``phases(c)`` gives each phase's (sends, arrival tags) for chunk c."""
    for c in range(chunks):
        steps = phases(c)
        if channel > 0 and steps[channel - 1][1]:
            yield (WAITALL, steps[channel - 1][1])
        if channel < nphases and steps[channel][0]:
            yield (BATCH, steps[channel][0])


@register
class Ring(Algorithm):
    name = "ring"
    kinds = ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce")
    summary = "neighbour to neighbour; reduce/broadcast as a pipelined chain from/to the root"

    def pipelined_bytes(self, kind: str, m: float, n: int) -> float | None:
        return m if kind in ("broadcast", "reduce") else None  # the chain; rings need none

    def flows(self, kind: str, m: float, ctx: Context) -> list[Flow]:
        n = ctx.n
        if n == 1:
            return []
        per_link = {
            "all_reduce": 2 * (n - 1) / n * m,
            "reduce_scatter": (n - 1) / n * m,
            "all_gather": (n - 1) * m,
        }
        if kind in per_link:
            rails = self.rails(kind, ctx)
            flows = []
            for rail in range(rails):
                order = self.ring_order(ctx, rail)
                flows += [Flow(order[i], order[(i + 1) % n], per_link[kind] / rails)
                          for i in range(n)]
            return flows
        order = self._chain(kind, ctx)
        return [Flow(order[k], order[k + 1], m) for k in range(n - 1)]

    @staticmethod
    def rails(kind: str, ctx: Context) -> int:
        """Rings side by side: across nodes NCCL gives each NIC rail its own channels, so a
        group spanning nodes runs one ring per local rank (each leaving its node by another
        GPU's NIC); inside one node a single ring order carries everything."""
        if kind in ("broadcast", "reduce") or ctx.nodes < 2 or ctx.per_node < 2:
            return 1
        return ctx.per_node

    @staticmethod
    def ring_order(ctx: Context, rail: int) -> list[int]:
        """Group ranks in ring order for ``rail``, node by node, the direction alternating so
        that each crossing stays on one rail: even nodes run r, r+1, ..., r-1 (mod g), odd
        nodes r-1, r-2, ..., r. Every GPU's NIC sends for one rail's ring and receives for
        one."""
        if ctx.nodes < 2 or ctx.per_node < 2:
            return list(range(ctx.n))
        g = ctx.per_node
        return [x * g + ((rail + j) % g if x % 2 == 0 else (rail - 1 - j) % g)
                for x in range(ctx.nodes) for j in range(g)]

    def channels(self, kind: str, ctx: Context) -> int:
        return self.rails(kind, ctx)

    def symmetry(self, kind: str, ctx: Context) -> tuple[int, int] | None:
        found = shape(ctx)
        if kind in ROOTED or found is None:
            return None
        k, g = found
        if k == 1 or g == 1:
            return 1, 1  # one ring over the ranks in order
        # a local shift moves each rail's ring onto the next rail's; a node shift keeps each
        # node's direction only by an even number of nodes, and wraps round only when k is even
        return (2 if k % 2 == 0 else k), 1

    def moves_channels(self, kind: str, ctx: Context) -> bool:
        return self.rails(kind, ctx) > 1

    def relabel(self, tag: Any, shift: Shift) -> Any:
        channel, c, s = tag  # no rank in it; the channel is the rail
        rails = shift.g if shift.k > 1 and shift.g > 1 else 1
        return (channel + shift.locals) % rails, c, s

    @staticmethod
    def _chain(kind: str, ctx: Context) -> list[int]:
        order = [(ctx.root + k) % ctx.n for k in range(ctx.n)]  # a chain starting at the root
        if kind == "reduce":
            order.reverse()  # towards the root
        return order

    def steps(self, kind: str, ctx: Context) -> int:
        n = ctx.n
        if n == 1:
            return 0
        return 2 * (n - 1) if kind == "all_reduce" else n - 1

    def program(self, kind: str, m: float, ctx: Context, rank: int, chunks: int,
                channel: int = 0) -> Iterator[Prim]:
        n = ctx.n
        if n == 1:
            return
        if kind in ("broadcast", "reduce"):
            yield from self._chain_program(kind, m, ctx, rank, chunks)
            return
        nsteps = {"all_reduce": 2 * (n - 1), "reduce_scatter": n - 1, "all_gather": n - 1}[kind]
        rails = self.rails(kind, ctx)
        piece = (m if kind == "all_gather" else m / n) / chunks / rails
        order = self.ring_order(ctx, channel)
        after = order[(order.index(rank) + 1) % n]
        nxt = ((rank,), (after,))
        for c in range(chunks):
            for s in range(nsteps):
                if s:
                    yield (RECV, (channel, c, s - 1))
                yield (SEND, nxt[0], nxt[1], piece, (channel, c, s))
            yield (RECV, (channel, c, nsteps - 1))

    def _chain_program(self, kind: str, m: float, ctx: Context, rank: int, chunks: int
                       ) -> Iterator[Prim]:
        order = self._chain(kind, ctx)
        pos = order.index(rank)
        piece = m / chunks
        for c in range(chunks):
            if pos > 0:
                yield (RECV, c)
            if pos < ctx.n - 1:
                yield (SEND, (rank,), (order[pos + 1],), piece, c)


@register
class Direct(Algorithm):
    name = "direct"
    kinds = ("reduce_scatter", "all_gather", "all_to_all", "broadcast", "reduce", "scatter",
             "gather", "send_recv")
    summary = "every rank talks to each peer at once (one step through a switch)"

    def flows(self, kind: str, m: float, ctx: Context) -> list[Flow]:
        n = ctx.n
        if kind == "send_recv":
            return [Flow(i, j, m) for i, j in _send_recv_pairs(ctx)]
        if n == 1:
            return []
        if kind in ("reduce_scatter", "all_to_all"):
            return [Flow(i, j, m / n) for i, j in _pairs(n)]
        if kind == "all_gather":
            return [Flow(i, j, m) for i, j in _pairs(n)]
        r = ctx.root
        if kind in ("broadcast", "scatter"):
            return [Flow(r, j, m) for j in range(n) if j != r]
        return [Flow(j, r, m) for j in range(n) if j != r]  # reduce, gather

    def flows_from(self, kind: str, m: float, ctx: Context, sources: set[int]) -> list[Flow]:
        n = ctx.n
        if kind not in ("reduce_scatter", "all_to_all", "all_gather") or n == 1:
            return super().flows_from(kind, m, ctx, sources)
        nbytes = m if kind == "all_gather" else m / n
        return [Flow(i, j, nbytes) for i in sorted(sources) for j in range(n) if j != i]

    def steps(self, kind: str, ctx: Context) -> int:
        return 1 if ctx.n > 1 else 0

    def channels(self, kind: str, ctx: Context) -> int:
        return 2  # sends, and receives: neither waits for the other

    def symmetry(self, kind: str, ctx: Context) -> tuple[int, int] | None:
        found = flat_symmetry(kind, ctx)
        if kind != "send_recv" or ctx.pattern != "pairs" or found is None:
            return found
        k, g = shape(ctx) or (1, ctx.n)
        if ctx.n % 2:
            return None  # the last rank has no partner
        return (1, 2) if k == 1 else ((1, g) if g % 2 == 0 else None)

    def program(self, kind: str, m: float, ctx: Context, rank: int, chunks: int,
                channel: int = 0) -> Iterator[Prim]:
        n, r = ctx.n, ctx.root
        peers = _others(rank, n)

        def phase(c: int) -> list[Phase]:
            if kind == "send_recv":
                pairs = _send_recv_pairs(ctx)
                return [(tuple(((rank,), (j,), m / chunks, (c, rank)) for i, j in pairs
                               if i == rank), tuple((c, i) for i, j in pairs if j == rank))]
            if kind in ("reduce_scatter", "all_to_all", "all_gather"):
                piece = (m if kind == "all_gather" else m / n) / chunks
                return [_exchange(rank, peers, piece, c)]
            if kind in ("broadcast", "scatter"):
                if rank == r:
                    return [(tuple(((r,), (j,), m / chunks, c) for j in peers), ())]
                return [((), (c,))]
            if rank == r:  # reduce, gather: the root collects
                return [((), tuple((c, j) for j in peers))]
            return [((((rank,), (r,), m / chunks, (c, rank)),), ())]

        if n > 1 or kind == "send_recv":
            yield from _pipelined(phase, 1, chunks, channel)


def _send_recv_pairs(ctx: Context) -> list[tuple[int, int]]:
    n = ctx.n
    if n == 1:
        return []
    if ctx.pattern == "ring":
        return [(i, (i + 1) % n) for i in range(n)]
    if ctx.pattern == "bidir_ring":
        if n == 2:
            return [(0, 1), (1, 0)]
        return [(i, (i + d) % n) for i in range(n) for d in (1, -1)]
    return [(i, i ^ 1) for i in range(n) if (i ^ 1) < n]  # pairs


@register
class TwoShot(Algorithm):
    name = "two_shot"
    kinds = ("all_reduce",)
    summary = "direct reduce-scatter then direct all-gather"

    def pipelined_bytes(self, kind: str, m: float, n: int) -> float | None:
        return m / max(n, 1)

    def flows(self, kind: str, m: float, ctx: Context) -> list[Flow]:
        n = ctx.n
        return [Flow(i, j, 2 * m / n) for i, j in _pairs(n)]

    def flows_from(self, kind: str, m: float, ctx: Context, sources: set[int]) -> list[Flow]:
        n = ctx.n
        return [Flow(i, j, 2 * m / n) for i in sorted(sources) for j in range(n) if j != i]

    def steps(self, kind: str, ctx: Context) -> int:
        return 2 if ctx.n > 1 else 0

    def channels(self, kind: str, ctx: Context) -> int:
        return 3

    def symmetry(self, kind: str, ctx: Context) -> tuple[int, int] | None:
        return flat_symmetry(kind, ctx)

    def program(self, kind: str, m: float, ctx: Context, rank: int, chunks: int,
                channel: int = 0) -> Iterator[Prim]:
        peers = _others(rank, ctx.n)
        piece = m / ctx.n / chunks
        yield from _pipelined(lambda c: [_exchange(rank, peers, piece, (c, "rs")),
                                         _exchange(rank, peers, piece, (c, "ag"))],
                              2, chunks, channel)


@register
class OneShot(Algorithm):
    name = "one_shot"
    kinds = ("all_reduce",)
    summary = "each rank reads every peer's whole buffer and reduces locally"

    def flows(self, kind: str, m: float, ctx: Context) -> list[Flow]:
        return [Flow(j, i, m) for i, j in _pairs(ctx.n)]

    def flows_from(self, kind: str, m: float, ctx: Context, sources: set[int]) -> list[Flow]:
        n = ctx.n
        return [Flow(j, i, m) for i in range(n) for j in sorted(sources) if j != i]

    def steps(self, kind: str, ctx: Context) -> int:
        return 1 if ctx.n > 1 else 0

    def channels(self, kind: str, ctx: Context) -> int:
        return 2

    def symmetry(self, kind: str, ctx: Context) -> tuple[int, int] | None:
        return flat_symmetry(kind, ctx)

    def program(self, kind: str, m: float, ctx: Context, rank: int, chunks: int,
                channel: int = 0) -> Iterator[Prim]:
        peers = _others(rank, ctx.n)

        def pull(c: int) -> list[Phase]:  # the reader issues the loads
            return [(tuple(((j,), (rank,), m / chunks, (c, j)) for j in peers),
                     tuple((c, j) for j in peers))]

        yield from _pipelined(pull, 1, chunks, channel)


@register
class Nvls(Algorithm):
    name = "nvls"
    kinds = ("all_reduce", "reduce_scatter", "reduce")
    needs_switch_reduction = True
    summary = "NVSwitch in-fabric reduction (multimem.ld_reduce), result by multicast"

    def pipelined_bytes(self, kind: str, m: float, n: int) -> float | None:
        return m / max(n, 1)

    def flows(self, kind: str, m: float, ctx: Context) -> list[Flow]:
        n = ctx.n
        if n == 1:
            return []
        if kind == "all_reduce":
            # ld_reduce of own 1/n slice pulls that slice from all n ranks (own included);
            # multimem.st of the reduced slice is replicated to all n ranks.
            return [f for i in range(n) for f in (
                Flow(i, SWITCH, m + m / n), Flow(SWITCH, i, m / n + m))]
        if kind == "reduce_scatter":
            return [f for i in range(n) for f in (Flow(i, SWITCH, m), Flow(SWITCH, i, m / n))]
        return [Flow(i, SWITCH, m) for i in range(n)] + [Flow(SWITCH, ctx.root, m)]  # reduce

    def steps(self, kind: str, ctx: Context) -> int:
        if ctx.n == 1:
            return 0
        return 2 if kind == "all_reduce" else 1

    def program(self, kind: str, m: float, ctx: Context, rank: int, chunks: int,
                channel: int = 0) -> Iterator[Prim]:
        n = ctx.n
        if n == 1:
            return
        everyone = tuple(range(n))
        if kind == "reduce":
            if rank == ctx.root:
                for c in range(chunks):
                    yield (SEND, everyone, (rank,), m / chunks, c)
                    yield (RECV, c)
            return
        piece = m / n / chunks

        def phases(c: int) -> list[Phase]:
            load = ((everyone, (rank,), piece, (c, "ld", rank)),)  # multimem.ld_reduce
            if kind == "reduce_scatter":
                return [(load, ((c, "ld", rank),))]
            store = (((rank,), everyone, piece, (c, "st", rank)),)  # multimem.st
            return [(load, ((c, "ld", rank),)), (store, tuple((c, "st", j) for j in everyone))]

        yield from _pipelined(phases, 1 if kind == "reduce_scatter" else 2, chunks, channel)

    def channels(self, kind: str, ctx: Context) -> int:
        return {"all_reduce": 3, "reduce_scatter": 2}.get(kind, 1)

    def symmetry(self, kind: str, ctx: Context) -> tuple[int, int] | None:
        # every rank loads from and stores to all: any relabelling keeps the programs
        return None if kind in ROOTED or shape(ctx) is None else (1, 1)


@register
class Multicast(Algorithm):
    name = "multicast"
    kinds = ("all_gather", "broadcast")
    needs_multicast = True
    summary = "write once to a multicast address; the NVSwitch replicates to every rank"

    def flows(self, kind: str, m: float, ctx: Context) -> list[Flow]:
        n = ctx.n
        if n == 1:
            return []
        if kind == "all_gather":  # every rank's shard reaches all n ranks, itself included
            return [f for i in range(n) for f in (Flow(i, SWITCH, m), Flow(SWITCH, i, n * m))]
        return [Flow(ctx.root, SWITCH, m)] + [Flow(SWITCH, j, m) for j in range(n)]

    def steps(self, kind: str, ctx: Context) -> int:
        return 1 if ctx.n > 1 else 0

    def program(self, kind: str, m: float, ctx: Context, rank: int, chunks: int,
                channel: int = 0) -> Iterator[Prim]:
        n = ctx.n
        if n == 1:
            return
        everyone = tuple(range(n))

        def phase(c: int) -> list[Phase]:
            if kind == "all_gather":
                return [((((rank,), everyone, m / chunks, (c, rank)),),
                         tuple((c, j) for j in everyone))]
            sends = (((rank,), everyone, m / chunks, c),) if rank == ctx.root else ()
            return [(sends, (c,))]

        yield from _pipelined(phase, 1, chunks, channel)

    def channels(self, kind: str, ctx: Context) -> int:
        return 2

    def symmetry(self, kind: str, ctx: Context) -> tuple[int, int] | None:
        return None if kind in ROOTED or shape(ctx) is None else (1, 1)


@register
class Pairwise(Algorithm):
    name = "pairwise"
    kinds = ("all_to_all",)
    summary = "n-1 rounds; in round k rank i sends to i+k and receives from i-k"

    def flows(self, kind: str, m: float, ctx: Context) -> list[Flow]:
        return [Flow(i, j, m / ctx.n) for i, j in _pairs(ctx.n)]

    def flows_from(self, kind: str, m: float, ctx: Context, sources: set[int]) -> list[Flow]:
        n = ctx.n
        return [Flow(i, j, m / n) for i in sorted(sources) for j in range(n) if j != i]

    def steps(self, kind: str, ctx: Context) -> int:
        return ctx.n - 1

    def symmetry(self, kind: str, ctx: Context) -> tuple[int, int] | None:
        return flat_symmetry(kind, ctx)

    def relabel(self, tag: Any, shift: Shift) -> Any:
        return tag  # (chunk, round): no rank in it

    def program(self, kind: str, m: float, ctx: Context, rank: int, chunks: int,
                channel: int = 0) -> Iterator[Prim]:
        n = ctx.n
        for c in range(chunks):
            for k in range(1, n):
                yield (SEND, (rank,), ((rank + k) % n,), m / n / chunks, (c, k))
                yield (RECV, (c, k))


@functools.lru_cache(maxsize=64)
def tree_positions(n: int, which: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(rank at each heap position, position of each rank) of binary tree ``which``: tree 0 is
    the heap order, tree 1 its mirror, so most inner ranks of one tree are leaves of the other
    (NCCL's double binary tree). Kept: every rank's program asks for it, once per chunk."""
    at = tuple(range(n)) if which == 0 else tuple(n - 1 - p for p in range(n))
    return at, at  # the mirror is its own inverse


def relabel_tree_tag(tag: Any, shift: Shift) -> Any:
    """A tree's tags: ("up", tree, chunk, sender), ("down", tree, chunk) (no rank), else the
    default (the sender last)."""
    if tag[0] == "down":
        return tag
    return (*tag[:-1], shift.rank(tag[-1]))


def tree_channel(rank: int, parent: int | None, kids: list[int], piece: float, chunks: int,
                 down: bool, tree: object, ready: Callable[[int], tuple[object, ...]] = lambda c: ()
                 ) -> Iterator[Prim]:
    """One tree's reduce-up (``down`` False) or broadcast-down channel at ``rank``, chunk by
    chunk: a rank sends a chunk up once its children's and ``ready(c)``'s data arrived; the
    root turns it around; the others forward what comes down. ``tree`` names the tree in tags."""
    for c in range(chunks):
        up_in = (*ready(c), *(("up", tree, c, kid) for kid in kids))
        if not down:
            if up_in:
                yield (WAITALL, up_in)
            if parent is not None:
                yield (SEND, (rank,), (parent,), piece, ("up", tree, c, rank))
            continue
        if parent is None:  # the root turns the reduced chunk around
            yield (WAITALL, up_in)
        else:
            yield (RECV, ("down", tree, c))
        if kids:
            yield (BATCH, tuple(((rank,), (kid,), piece, ("down", tree, c)) for kid in kids))


def rail_tree(which: int, node: int, k: int, g: int, local: int
              ) -> tuple[int | None, list[int]]:
    """(parent, children) of the GPU ``local`` of ``node`` in the binary tree ``which`` of the k
    nodes' GPUs with that local rank (one rail)."""
    at, pos = tree_positions(k, which)
    p = pos[node]
    kids = [at[q] * g + local for q in (2 * p + 1, 2 * p + 2) if q < k]
    return (at[(p - 1) // 2] * g + local if p else None), kids


def rail_tree_result(which: int, c: int, node: int, k: int, g: int, local: int
                     ) -> list[object]:
    """The arrival tags that complete chunk ``c`` of rail tree ``which`` at a GPU: the root's
    children's partial sums, else what comes down."""
    at, pos = tree_positions(k, which)
    if pos[node]:
        return [("down", which, c)]
    return [("up", which, c, at[q] * g + local) for q in (1, 2) if q < k]


@register
class Tree(Algorithm):
    name = "tree"
    kinds = ("all_reduce",)
    summary = "double binary tree: half the buffer reduced up and broadcast down each tree"

    def pipelined_bytes(self, kind: str, m: float, n: int) -> float | None:
        return m / 2  # half the buffer per tree

    def flows(self, kind: str, m: float, ctx: Context) -> list[Flow]:
        flows: list[Flow] = []
        for which in (0, 1):
            at, _ = tree_positions(ctx.n, which)
            for p in range(1, ctx.n):
                child, parent = at[p], at[(p - 1) // 2]
                flows += [Flow(child, parent, m / 2), Flow(parent, child, m / 2)]
        return flows

    def steps(self, kind: str, ctx: Context) -> int:
        return 2 * (ctx.n.bit_length() - 1) if ctx.n > 1 else 0

    def channels(self, kind: str, ctx: Context) -> int:
        return 4  # (tree 0, tree 1) x (reduce up, broadcast down), as NCCL's split warps

    def program(self, kind: str, m: float, ctx: Context, rank: int, chunks: int,
                channel: int = 0) -> Iterator[Prim]:
        n = ctx.n
        if n == 1:
            return
        which, down = divmod(channel, 2)
        at, pos = tree_positions(n, which)
        p = pos[rank]
        kids = [at[q] for q in (2 * p + 1, 2 * p + 2) if q < n]
        parent = at[(p - 1) // 2] if p else None
        yield from tree_channel(rank, parent, kids, m / 2 / chunks, chunks, bool(down), which)


@register
class Hierarchical(Algorithm):
    """Inside each node over NVLink, across nodes over the NICs (one NIC per GPU)."""

    name = "hierarchical"
    kinds = ("all_reduce", "reduce_scatter", "all_gather")
    hierarchical = True
    summary = "reduce-scatter/all-gather inside each node, the 1/g slice across nodes"

    def pipelined_bytes(self, kind: str, m: float, n: int) -> float | None:
        return m / max(n, 1)

    def flows(self, kind: str, m: float, ctx: Context) -> list[Flow]:
        g, k = ctx.per_node, ctx.nodes  # ranks per node, nodes
        flows: list[Flow] = []

        def rank(node: int, local: int) -> int:
            return node * g + local

        for node in range(k):
            for i, j in _pairs(g):
                a, b = rank(node, i), rank(node, j)
                if kind == "all_reduce":  # direct RS then direct AG of m/g slices
                    flows.append(Flow(a, b, 2 * m / g, "intra"))
                elif kind == "reduce_scatter":  # RS of the whole buffer to m/g slices
                    flows.append(Flow(a, b, m / g, "intra"))
                else:  # all-gather: after the inter-node phase each rank holds k shards
                    flows.append(Flow(a, b, k * m, "intra"))
        for local in range(g):
            for x, y in _pairs(k):
                a, b = rank(x, local), rank(y, local)
                if kind == "all_reduce":  # two-shot across nodes on the m/g slice
                    flows.append(Flow(a, b, 2 * m / (g * k), "inter"))
                elif kind == "reduce_scatter":
                    flows.append(Flow(a, b, m / (g * k), "inter"))
                else:
                    flows.append(Flow(a, b, m, "inter"))
        return flows

    def flows_from(self, kind: str, m: float, ctx: Context, sources: set[int]) -> list[Flow]:
        g, k = ctx.per_node, ctx.nodes
        intra = {"all_reduce": 2 * m / g, "reduce_scatter": m / g}.get(kind, k * m)
        inter = {"all_reduce": 2 * m / (g * k), "reduce_scatter": m / (g * k)}.get(kind, m)
        out = []
        for a in sorted(sources):
            node, local = divmod(a, g)
            out += [Flow(a, node * g + j, intra, "intra") for j in range(g) if j != local]
        for a in sorted(sources):
            node, local = divmod(a, g)
            out += [Flow(a, y * g + local, inter, "inter") for y in range(k) if y != node]
        return out

    def steps(self, kind: str, ctx: Context) -> int:
        return 4 if kind == "all_reduce" else 2

    def program(self, kind: str, m: float, ctx: Context, rank: int, chunks: int,
                channel: int = 0) -> Iterator[Prim]:
        g, k = ctx.per_node, ctx.nodes
        node, local = divmod(rank, g)
        here = [node * g + j for j in _others(local, g)]
        across = [x * g + local for x in _others(node, k)]

        def phases(c: int) -> list[Phase]:
            if kind == "all_gather":
                return [_exchange(rank, across, m / chunks, (c, "x")),
                        _exchange(rank, here, k * m / chunks, (c, "in"))]
            out = [_exchange(rank, here, m / g / chunks, (c, "rs")),
                   _exchange(rank, across, m / (g * k) / chunks, (c, "xrs"))]
            if kind == "all_reduce":
                out += [_exchange(rank, across, m / (g * k) / chunks, (c, "xag")),
                        _exchange(rank, here, m / g / chunks, (c, "ag"))]
            return out

        yield from _pipelined(phases, self._phases(kind), chunks, channel)

    @staticmethod
    def _phases(kind: str) -> int:
        return 4 if kind == "all_reduce" else 2

    def symmetry(self, kind: str, ctx: Context) -> tuple[int, int] | None:
        return (1, 1) if shape(ctx) is not None else None

    def channels(self, kind: str, ctx: Context) -> int:
        return self._phases(kind) + 1


@register
class HierarchicalTree(Algorithm):
    """Like ``hierarchical``, but the 1/g slice is all-reduced across nodes by a double binary
    tree (as NCCL's tree and NVLS-tree at scale): more NIC bytes, 2 log2(k) network hops."""

    name = "hierarchical_tree"
    kinds = ("all_reduce",)
    hierarchical = True
    summary = "reduce-scatter inside each node, double binary tree across nodes, all-gather"

    def flows(self, kind: str, m: float, ctx: Context) -> list[Flow]:
        g, k = ctx.per_node, ctx.nodes
        flows = [Flow(x * g + i, x * g + j, 2 * m / g, "intra")
                 for x in range(k) for i, j in _pairs(g)]
        tree = ALGORITHMS["tree"].flows(kind, m / g, Context(n=k))
        for local in range(g):
            flows += [Flow(f.src * g + local, f.dst * g + local, f.nbytes, "inter") for f in tree]
        return flows

    def steps(self, kind: str, ctx: Context) -> int:
        return 2 + (2 * (ctx.nodes.bit_length() - 1) if ctx.nodes > 1 else 0)

    def channels(self, kind: str, ctx: Context) -> int:
        return 7  # intra RS, (up, down) x 2 trees, intra AG, collect

    def symmetry(self, kind: str, ctx: Context) -> tuple[int, int] | None:
        found = shape(ctx)  # every rail runs the same trees; the trees' nodes differ
        return (found[0], 1) if found is not None else None

    def relabel(self, tag: Any, shift: Shift) -> Any:
        return relabel_tree_tag(tag, shift)

    def program(self, kind: str, m: float, ctx: Context, rank: int, chunks: int,
                channel: int = 0) -> Iterator[Prim]:
        g, k = ctx.per_node, ctx.nodes
        node, local = divmod(rank, g)
        here = [node * g + j for j in _others(local, g)]
        piece = m / g / chunks  # this rank's slice of one chunk
        if channel == 0:
            for c in range(chunks):
                yield (BATCH, _exchange(rank, here, piece, (c, "rs"))[0])
            return
        if channel == 6:
            for c in range(chunks):
                yield (WAITALL, _exchange(rank, here, piece, (c, "ag"))[1])
            return

        def rs_in(c: int) -> tuple[object, ...]:
            return _exchange(rank, here, piece, (c, "rs"))[1]

        if channel == 5:  # all-gather a chunk once both trees have brought it back
            for c in range(chunks):
                tags: list[object] = list(rs_in(c))
                for which in (0, 1):
                    tags += rail_tree_result(which, c, node, k, g, local)
                yield (WAITALL, tuple(tags))
                yield (BATCH, _exchange(rank, here, piece, (c, "ag"))[0])
            return
        which, down = divmod(channel - 1, 2)
        parent, kids = rail_tree(which, node, k, g, local)
        yield from tree_channel(rank, parent, kids, piece / 2, chunks, bool(down), which, rs_in)
