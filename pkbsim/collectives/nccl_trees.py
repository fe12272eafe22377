"""NCCL's trees, as NCCL builds them (src/graph/trees.cc, src/graph/tuning.cc; docs/metrics.md
section 6.3): a chain through the GPUs of each node, joined across nodes by a double binary tree
(``nccl_tree``), and NVLS inside each node with a tree across nodes (``nvls_tree``, NCCL's
NVLSTree). Traffic formulas: docs/metrics.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from pkbsim.collectives.algorithms import (
    rail_tree,
    rail_tree_result,
    relabel_tree_tag,
    tree_channel,
    tree_positions,
)
from pkbsim.collectives.base import (
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


def _shape(ctx: Context) -> tuple[int, int]:
    """(ranks per node g, nodes k); a group with uneven nodes is one chain."""
    if ctx.nodes > 1 and ctx.per_node > 0:
        return ctx.per_node, ctx.nodes
    return ctx.n, 1


def _depth(k: int) -> int:
    return k.bit_length() - 1 if k > 1 else 0


@register
class NcclTree(Algorithm):
    """Tree ``which`` (0 or 1) carries half the buffer: inside each node a chain (local rank 0
    first for tree 0, the reverse for tree 1, so the two trees leave a node by different GPUs
    and NICs); the chains' heads form a binary tree of nodes (tree 1 mirrors tree 0)."""

    name = "nccl_tree"
    kinds = ("all_reduce",)
    summary = "NCCL's tree: a chain inside each node, a double binary tree across nodes"

    def pipelined_bytes(self, kind: str, m: float, n: int) -> float | None:
        return m / 2

    @staticmethod
    def rails(ctx: Context) -> int:
        """Tree pairs side by side: across nodes one per local rank, each pair's chains
        starting at another GPU, so every NIC carries a share (NCCL's channels)."""
        return ctx.per_node if ctx.nodes > 1 and ctx.per_node > 1 else 1

    @staticmethod
    def links(ctx: Context, which: int, rank: int, rail: int = 0
              ) -> tuple[int | None, list[int]]:
        """(parent, children) of group rank ``rank`` in tree ``which`` of ``rail``."""
        g, k = _shape(ctx)
        node, local = divmod(rank, g)
        chain = ([(rail + j) % g for j in range(g)] if which == 0
                 else [(rail - 1 - j) % g for j in range(g)])
        i = chain.index(local)
        at, pos = tree_positions(k, which)
        p = pos[node]
        kids = [node * g + chain[i + 1]] if i + 1 < g else []
        if i > 0:
            return node * g + chain[i - 1], kids
        kids += [at[q] * g + chain[0] for q in (2 * p + 1, 2 * p + 2) if q < k]
        parent = at[(p - 1) // 2] * g + chain[0] if p else None
        return parent, kids

    def flows(self, kind: str, m: float, ctx: Context) -> list[Flow]:
        flows: list[Flow] = []
        if ctx.n == 1:
            return flows
        rails = self.rails(ctx)
        share = m / 2 / rails
        for rail in range(rails):
            for which in (0, 1):
                for r in range(ctx.n):
                    parent, _ = self.links(ctx, which, r, rail)
                    if parent is not None:
                        flows += [Flow(r, parent, share), Flow(parent, r, share)]
        return flows

    def steps(self, kind: str, ctx: Context) -> int:
        g, k = _shape(ctx)
        return 2 * ((g - 1) + _depth(k)) if ctx.n > 1 else 0

    def channels(self, kind: str, ctx: Context) -> int:
        return 4 * self.rails(ctx)  # per rail: (tree 0, tree 1) x (reduce up, broadcast down)

    def symmetry(self, kind: str, ctx: Context) -> tuple[int, int] | None:
        found = shape(ctx)
        if found is None or self.rails(ctx) == 1:
            return None  # one chain (a line of ranks) or one tree of nodes
        return found[0], 1  # a local shift moves each rail's trees onto the next rail's

    def moves_channels(self, kind: str, ctx: Context) -> bool:
        return self.rails(ctx) > 1

    def relabel(self, tag: Any, shift: Shift) -> Any:
        rail, which = tag[1]
        moved = (tag[0], ((rail + shift.locals) % shift.g, which), *tag[2:])
        return moved if tag[0] == "down" else (*moved[:-1], shift.rank(tag[-1]))

    def program(self, kind: str, m: float, ctx: Context, rank: int, chunks: int,
                channel: int = 0) -> Iterator[Prim]:
        if ctx.n == 1:
            return
        rail, rest = divmod(channel, 4)
        which, down = divmod(rest, 2)
        parent, kids = self.links(ctx, which, rank, rail)
        yield from tree_channel(rank, parent, kids, m / 2 / self.rails(ctx) / chunks, chunks,
                                bool(down), (rail, which))


def _node_nvls_flows(m: float, ctx: Context) -> list[Flow]:
    """Inside each node: every GPU's multimem.ld_reduce of its 1/g slice and multimem.st of
    the result (NVLS's traffic, section 1 of docs/metrics.md)."""
    g = ctx.per_node
    return [f for r in range(ctx.n) for f in (Flow(r, SWITCH, m + m / g, "intra"),
                                                Flow(SWITCH, r, m / g + m, "intra"))]


def _nvls_load(rank: int, here: tuple[int, ...], piece: float, chunks: int) -> Iterator[Prim]:
    """multimem.ld_reduce of the rank's slice from every GPU of its node, chunk by chunk."""
    for c in range(chunks):
        yield (SEND, here, (rank,), piece, (c, "ld", rank))


def _nvls_store(rank: int, here: tuple[int, ...], piece: float, chunks: int,
                ready: Callable[[int], tuple[object, ...]]) -> Iterator[Prim]:
    """multimem.st of each reduced chunk once ``ready(c)``'s data arrived."""
    for c in range(chunks):
        yield (WAITALL, ready(c))
        yield (SEND, (rank,), here, piece, (c, "st", rank))


def _nvls_collect(here: tuple[int, ...], chunks: int) -> Iterator[Prim]:
    """Wait for every GPU of the node's store of each chunk."""
    for c in range(chunks):
        yield (WAITALL, tuple((c, "st", j) for j in here))


@register
class NvlsTree(Algorithm):
    """NVLSTree: in each node an NVLS reduce-scatter (multimem.ld_reduce of the rank's 1/g
    slice), the slice all-reduced across nodes by a double binary tree of the GPUs with the same
    local rank (one NIC rail each), then an NVLS all-gather (multimem.st)."""

    name = "nvls_tree"
    kinds = ("all_reduce",)
    hierarchical = True
    needs_switch_reduction = True
    summary = "NVLS inside each node, a double binary tree per rail across nodes (NVLSTree)"

    def pipelined_bytes(self, kind: str, m: float, n: int) -> float | None:
        return m / max(n, 1)

    def flows(self, kind: str, m: float, ctx: Context) -> list[Flow]:
        g, k = ctx.per_node, ctx.nodes
        flows = _node_nvls_flows(m, ctx)
        for local in range(g):
            for which in (0, 1):
                at, _ = tree_positions(k, which)
                for p in range(1, k):
                    child, parent = at[p] * g + local, at[(p - 1) // 2] * g + local
                    flows += [Flow(child, parent, m / g / 2, "inter"),
                              Flow(parent, child, m / g / 2, "inter")]
        return flows

    def steps(self, kind: str, ctx: Context) -> int:
        return 2 + 2 * _depth(ctx.nodes)

    def channels(self, kind: str, ctx: Context) -> int:
        return 7  # NVLS load, (up, down) x 2 trees, NVLS store, collect

    def symmetry(self, kind: str, ctx: Context) -> tuple[int, int] | None:
        found = shape(ctx)  # every rail runs the same trees; the trees' nodes differ
        return (found[0], 1) if found is not None else None

    def relabel(self, tag: Any, shift: Shift) -> Any:
        return relabel_tree_tag(tag, shift)

    def program(self, kind: str, m: float, ctx: Context, rank: int, chunks: int,
                channel: int = 0) -> Iterator[Prim]:
        g, k = ctx.per_node, ctx.nodes
        node, local = divmod(rank, g)
        here = tuple(node * g + j for j in range(g))
        piece = m / g / chunks  # this rank's slice of one chunk
        if channel == 0:
            yield from _nvls_load(rank, here, piece, chunks)
            return
        if channel == 6:
            yield from _nvls_collect(here, chunks)
            return
        if channel == 5:  # multimem.st once both trees have brought the chunk back
            yield from _nvls_store(rank, here, piece, chunks, lambda c: (
                (c, "ld", rank), *rail_tree_result(0, c, node, k, g, local),
                *rail_tree_result(1, c, node, k, g, local)))
            return
        which, down = divmod(channel - 1, 2)
        parent, kids = rail_tree(which, node, k, g, local)
        yield from tree_channel(rank, parent, kids, piece / 2, chunks, bool(down), which,
                                lambda c: ((c, "ld", rank),))


@register
class CollNet(NvlsTree):
    """NCCL's CollNet with in-network reduction (InfiniBand SHARP): in each node an NVLS
    reduce-scatter of the rank's 1/g slice, the slice sent once into the network and the
    reduced slice received once from it, then an NVLS all-gather. The switches' reduction is not
    a rank, so each NIC's traffic is modelled as a send of the slice to the same GPU of the next
    node and a receive from the previous one: one slice each way per NIC, SHARP's load, and one
    network step on the critical path."""

    name = "collnet"
    needs_network_reduction = True
    summary = "NVLS inside each node, in-network reduction across nodes (SHARP, NCCL CollNet)"

    def flows(self, kind: str, m: float, ctx: Context) -> list[Flow]:
        g, k = ctx.per_node, ctx.nodes
        return _node_nvls_flows(m, ctx) + [
            Flow(r, (r // g + 1) % k * g + r % g, m / g, "inter") for r in range(ctx.n)]

    def steps(self, kind: str, ctx: Context) -> int:
        return 3  # NVLS load, the network's reduction, NVLS store

    def channels(self, kind: str, ctx: Context) -> int:
        return 4  # NVLS load, network send, NVLS store, collect

    def symmetry(self, kind: str, ctx: Context) -> tuple[int, int] | None:
        return (1, 1) if shape(ctx) is not None else None  # no tree: a ring of nodes

    def program(self, kind: str, m: float, ctx: Context, rank: int, chunks: int,
                channel: int = 0) -> Iterator[Prim]:
        g, k = ctx.per_node, ctx.nodes
        node, local = divmod(rank, g)
        here = tuple(node * g + j for j in range(g))
        piece = m / g / chunks
        prev = (node - 1) % k * g + local
        nxt = (node + 1) % k * g + local
        if channel == 0:
            yield from _nvls_load(rank, here, piece, chunks)
        elif channel == 1:  # the node's partial slice into the network
            for c in range(chunks):
                yield (WAITALL, ((c, "ld", rank),))
                yield (SEND, (rank,), (nxt,), piece, (c, "net", rank))
        elif channel == 2:  # multimem.st once the reduced slice is back
            yield from _nvls_store(rank, here, piece, chunks,
                                   lambda c: ((c, "ld", rank), (c, "net", prev)))
        else:
            yield from _nvls_collect(here, chunks)
