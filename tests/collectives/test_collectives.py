"""Closed-form traffic of each algorithm, asserted exactly (docs/metrics.md derives them)."""

from __future__ import annotations

from collections import defaultdict

import pytest

from pkbsim.collectives import ALGORITHMS, BUSBW_FACTOR, algbw_busbw
from pkbsim.collectives.base import SWITCH, Context, Flow

M = 1 << 21  # 2 MiB


def ports(flows: list[Flow]) -> tuple[dict[int, float], dict[int, float]]:
    egress: dict[int, float] = defaultdict(float)
    ingress: dict[int, float] = defaultdict(float)
    for f in flows:
        if f.src != SWITCH:
            egress[f.src] += f.nbytes
        if f.dst != SWITCH:
            ingress[f.dst] += f.nbytes
    return egress, ingress


def busiest(alg: str, kind: str, n: int, root: int = 0) -> tuple[float, float]:
    e, i = ports(ALGORITHMS[alg].flows(kind, M, Context(n=n, root=root)))
    return max(e.values(), default=0.0), max(i.values(), default=0.0)


@pytest.mark.parametrize("n", [2, 4, 8, 72])
def test_symmetric_collectives(n: int) -> None:
    assert busiest("direct", "all_gather", n) == ((n - 1) * M, (n - 1) * M)
    assert busiest("ring", "all_gather", n) == ((n - 1) * M, (n - 1) * M)
    assert busiest("direct", "reduce_scatter", n) == pytest.approx(((n - 1) / n * M,) * 2)
    assert busiest("direct", "all_to_all", n) == pytest.approx(((n - 1) / n * M,) * 2)
    two = 2 * (n - 1) / n * M
    assert busiest("ring", "all_reduce", n) == pytest.approx((two, two))
    assert busiest("two_shot", "all_reduce", n) == pytest.approx((two, two))
    assert busiest("one_shot", "all_reduce", n) == ((n - 1) * M, (n - 1) * M)
    nvls = (n + 1) / n * M
    assert busiest("nvls", "all_reduce", n) == pytest.approx((nvls, nvls))
    assert busiest("nvls", "reduce_scatter", n) == pytest.approx((M, M / n))


@pytest.mark.parametrize("root", [0, 3])
def test_rooted_collectives(root: int) -> None:
    n = 8
    e, i = ports(ALGORITHMS["direct"].flows("broadcast", M, Context(n=n, root=root)))
    assert e[root] == (n - 1) * M and max(i.values()) == M
    e, i = ports(ALGORITHMS["ring"].flows("broadcast", M, Context(n=n, root=root)))
    assert max(e.values()) == M and i.get(root, 0) == 0
    e, i = ports(ALGORITHMS["direct"].flows("gather", M, Context(n=n, root=root)))
    assert i[root] == (n - 1) * M
    e, i = ports(ALGORITHMS["direct"].flows("scatter", M, Context(n=n, root=root)))
    assert e[root] == (n - 1) * M
    e, i = ports(ALGORITHMS["ring"].flows("reduce", M, Context(n=n, root=root)))
    assert i[root] == M and e.get(root, 0) == 0
    e, i = ports(ALGORITHMS["multicast"].flows("broadcast", M, Context(n=n, root=root)))
    assert e == {root: M} and all(v == M for v in i.values())


def test_send_recv_patterns() -> None:
    d = ALGORITHMS["direct"]
    for pattern, expected in (("ring", M), ("bidir_ring", 2 * M), ("pairs", M)):
        e, i = ports(d.flows("send_recv", M, Context(n=8, pattern=pattern)))
        assert max(e.values()) == expected and max(i.values()) == expected


def test_hierarchical_all_reduce_crosses_nodes_with_one_slice() -> None:
    g, k = 8, 2
    flows = ALGORITHMS["hierarchical"].flows("all_reduce", M, Context(n=16, nodes=k,
                                                                      per_node=g))
    inter = [f for f in flows if f.phase == "inter"]
    per_rank: dict[int, float] = defaultdict(float)
    for f in inter:
        per_rank[f.src] += f.nbytes
    assert max(per_rank.values()) == pytest.approx(2 * (k - 1) / k * M / g)
    assert all((f.src // g) != (f.dst // g) for f in inter)
    assert all((f.src // g) == (f.dst // g) for f in flows if f.phase == "intra")


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_single_rank_moves_nothing(name: str) -> None:
    alg = ALGORITHMS[name]
    ctx = Context(n=1)
    for kind in alg.kinds:
        if alg.applies(kind, ctx):
            assert alg.flows(kind, M, ctx) == []
            assert alg.steps(kind, ctx) == 0


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_pairwise_bytes_balance(name: str) -> None:
    """Every byte sent between GPUs is received by a GPU."""
    alg = ALGORITHMS[name]
    ctx = Context(n=16, nodes=2, per_node=8, pattern="ring")
    for kind in alg.kinds:
        if not alg.applies(kind, ctx):
            continue
        flows = [f for f in alg.flows(kind, M, ctx) if SWITCH not in (f.src, f.dst)]
        e, i = ports(flows)
        assert sum(e.values()) == pytest.approx(sum(i.values()))


def test_nccl_tests_bus_bandwidth() -> None:
    # all-reduce of 1 GB in 4 ms on 8 ranks: algbw 250 GB/s, busbw x 2*7/8 = 437.5 GB/s
    algbw, busbw = algbw_busbw("all_reduce", 1e9, 8, 4e-3)
    assert (algbw, busbw) == (pytest.approx(250e9), pytest.approx(437.5e9))
    # all-gather: S = n x shard
    algbw, busbw = algbw_busbw("all_gather", 1e8, 8, 4e-3)
    assert algbw == pytest.approx(200e9) and busbw == pytest.approx(175e9)
    assert BUSBW_FACTOR["broadcast"](8) == 1.0
