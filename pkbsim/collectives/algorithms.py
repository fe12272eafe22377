"""The algorithms the roofline considers. Traffic formulas are derived in docs/metrics.md."""

from __future__ import annotations

from pkbsim.collectives.base import SWITCH, Algorithm, Context, Flow, register


def _pairs(n: int) -> list[tuple[int, int]]:
    return [(i, j) for i in range(n) for j in range(n) if i != j]


@register
class Ring(Algorithm):
    name = "ring"
    kinds = ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce")
    summary = "neighbour to neighbour; reduce/broadcast as a pipelined chain from/to the root"

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
            return [Flow(i, (i + 1) % n, per_link[kind]) for i in range(n)]
        order = [(ctx.root + k) % n for k in range(n)]  # a chain starting at the root
        if kind == "reduce":
            order.reverse()  # towards the root
        return [Flow(order[k], order[k + 1], m) for k in range(n - 1)]

    def steps(self, kind: str, ctx: Context) -> int:
        n = ctx.n
        if n == 1:
            return 0
        return 2 * (n - 1) if kind == "all_reduce" else n - 1


@register
class Direct(Algorithm):
    name = "direct"
    kinds = ("reduce_scatter", "all_gather", "all_to_all", "broadcast", "reduce", "scatter",
             "gather", "send_recv")
    summary = "every rank talks to each peer at once (one step through a switch)"

    def flows(self, kind: str, m: float, ctx: Context) -> list[Flow]:
        n = ctx.n
        if kind == "send_recv":
            return _send_recv(m, ctx)
        if n == 1:
            return []
        if kind == "reduce_scatter":
            return [Flow(i, j, m / n) for i, j in _pairs(n)]
        if kind == "all_gather":
            return [Flow(i, j, m) for i, j in _pairs(n)]
        if kind == "all_to_all":
            return [Flow(i, j, m / n) for i, j in _pairs(n)]
        r = ctx.root
        if kind in ("broadcast", "scatter"):
            return [Flow(r, j, m) for j in range(n) if j != r]
        return [Flow(j, r, m) for j in range(n) if j != r]  # reduce, gather

    def steps(self, kind: str, ctx: Context) -> int:
        if kind == "send_recv":
            return 1 if ctx.n > 1 else 0
        return 1 if ctx.n > 1 else 0


def _send_recv(m: float, ctx: Context) -> list[Flow]:
    n = ctx.n
    if n == 1:
        return []
    if ctx.pattern == "ring":
        return [Flow(i, (i + 1) % n, m) for i in range(n)]
    if ctx.pattern == "bidir_ring":
        if n == 2:
            return [Flow(0, 1, m), Flow(1, 0, m)]
        return [Flow(i, (i + d) % n, m) for i in range(n) for d in (1, -1)]
    return [Flow(i, i ^ 1, m) for i in range(n) if (i ^ 1) < n]  # pairs


@register
class TwoShot(Algorithm):
    name = "two_shot"
    kinds = ("all_reduce",)
    summary = "direct reduce-scatter then direct all-gather"

    def flows(self, kind: str, m: float, ctx: Context) -> list[Flow]:
        n = ctx.n
        return [Flow(i, j, 2 * m / n) for i, j in _pairs(n)]

    def steps(self, kind: str, ctx: Context) -> int:
        return 2 if ctx.n > 1 else 0


@register
class OneShot(Algorithm):
    name = "one_shot"
    kinds = ("all_reduce",)
    summary = "each rank reads every peer's whole buffer and reduces locally"

    def flows(self, kind: str, m: float, ctx: Context) -> list[Flow]:
        return [Flow(j, i, m) for i, j in _pairs(ctx.n)]

    def steps(self, kind: str, ctx: Context) -> int:
        return 1 if ctx.n > 1 else 0


@register
class Nvls(Algorithm):
    name = "nvls"
    kinds = ("all_reduce", "reduce_scatter", "reduce")
    needs_switch_reduction = True
    summary = "NVSwitch in-fabric reduction (multimem.ld_reduce), result by multicast"

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


@register
class Hierarchical(Algorithm):
    """Inside each node over NVLink, across nodes over the NICs (one NIC per GPU)."""

    name = "hierarchical"
    kinds = ("all_reduce", "reduce_scatter", "all_gather")
    hierarchical = True
    summary = "reduce-scatter/all-gather inside each node, the 1/g slice across nodes"

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

    def steps(self, kind: str, ctx: Context) -> int:
        return 4 if kind == "all_reduce" else 2
