"""Every algorithm's declared symmetry (pkbsim/collectives/base.py, ``Algorithm.symmetry``):
each allowed shift maps every rank's programs, as a multiset over its channels, onto its
image's programs, with ranks and tags relabelled by ``Algorithm.relabel``. The symmetric
simulation (pkbsim/symmetry.py) is exact only where this holds."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from pkbsim.collectives import ALGORITHMS
from pkbsim.collectives.base import BATCH, RECV, SEND, WAITALL, Algorithm, Context, Shift

SHAPES = [(1, 2), (1, 3), (1, 4), (1, 8), (2, 1), (4, 1), (2, 2), (2, 4), (3, 4), (4, 2),
          (4, 4), (3, 3), (2, 8), (6, 2), (5, 2)]
KINDS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast", "reduce",
         "scatter", "gather", "send_recv")


def _send(send: tuple[Any, ...], alg: Algorithm, shift: Shift) -> tuple[Any, ...]:
    srcs, dsts, nbytes, tag = send
    return (tuple(sorted(shift.rank(s) for s in srcs)), tuple(sorted(shift.rank(d)
                                                                     for d in dsts)),
            nbytes, repr(alg.relabel(tag, shift)))


def _norm(prim: tuple[Any, ...], alg: Algorithm, shift: Shift) -> tuple[Any, ...]:
    """A primitive with its ranks and tags relabelled; a send's endpoints and a WAITALL's tags
    as sets (their order changes nothing)."""
    if prim[0] == SEND:
        return (SEND, *_send(prim[1:], alg, shift))
    if prim[0] == BATCH:
        return (BATCH, tuple(_send(s, alg, shift) for s in prim[1]))
    if prim[0] == RECV:
        return (RECV, repr(alg.relabel(prim[1], shift)))
    assert prim[0] == WAITALL
    return (WAITALL, tuple(sorted(repr(alg.relabel(t, shift)) for t in prim[1])))


def _programs(alg: Algorithm, kind: str, ctx: Context, rank: int, shift: Shift) -> Counter:
    out: Counter = Counter()
    for ch in range(alg.channels(kind, ctx)):
        prims = tuple(_norm(p, alg, shift) for p in alg.program(kind, 6.0, ctx, rank, 2, ch))
        out[prims] += 1
    return out


def _cases() -> list[tuple[str, str, int, int, str | None]]:
    cases = []
    for name, alg in ALGORITHMS.items():
        for kind in KINDS:
            if kind not in alg.kinds:
                continue
            for k, g in SHAPES:
                for pattern in (("ring", "bidir_ring", "pairs") if kind == "send_recv"
                                else (None,)):
                    cases.append((name, kind, k, g, pattern))
    return cases


@pytest.mark.parametrize(("name", "kind", "k", "g", "pattern"), _cases())
def test_declared_shifts_map_programs_onto_their_images(name: str, kind: str, k: int, g: int,
                                                        pattern: str | None) -> None:
    alg = ALGORITHMS[name]
    ctx = Context(n=k * g, root=0, pattern=pattern, nodes=k, per_node=g if k > 1 else 0)
    if not alg.applies(kind, ctx):
        return
    steps = alg.symmetry(kind, ctx)
    if steps is None:
        return
    node_step, local_step = steps
    assert k % node_step == 0 and g % local_step == 0, steps
    shifts = [Shift(node_step % k, 0, k, g), Shift(0, local_step % g, k, g)]
    for shift in shifts:
        if shift.nodes == 0 and shift.locals == 0:
            continue
        for r in range(ctx.n):
            mapped = _programs(alg, kind, ctx, r, shift)
            image = _programs(alg, kind, ctx, shift.rank(r), Shift(0, 0, k, g))
            assert mapped == image, (name, kind, k, g, pattern, shift, r)


def test_some_declarations_allow_a_shift() -> None:
    """The check above must not pass by every algorithm declaring no symmetry."""
    ctx = Context(n=16, nodes=4, per_node=4)
    assert ALGORITHMS["hierarchical"].symmetry("all_reduce", ctx) == (1, 1)
    assert ALGORITHMS["ring"].symmetry("all_reduce", ctx) == (2, 1)
    assert ALGORITHMS["nvls_tree"].symmetry("all_reduce", ctx) == (4, 1)
    assert ALGORITHMS["direct"].symmetry("all_to_all", ctx) == (1, 4)
    assert ALGORITHMS["tree"].symmetry("all_reduce", ctx) is None
    assert ALGORITHMS["ring"].symmetry("broadcast", ctx) is None


def test_a_wrong_relabelling_is_caught() -> None:
    """A shift that is not a symmetry (a node shift of the double binary tree's nodes) fails
    the comparison, so the test can fail."""
    alg = ALGORITHMS["nvls_tree"]
    ctx = Context(n=16, nodes=4, per_node=4)
    shift = Shift(1, 0, 4, 4)
    assert any(_programs(alg, "all_reduce", ctx, r, shift)
               != _programs(alg, "all_reduce", ctx, shift.rank(r), Shift(0, 0, 4, 4))
               for r in range(16))


def _refined_classes(k: int, trees: tuple[int, ...] = (0, 1)) -> int:
    """Colour refinement of the double binary tree of k nodes (tree_positions: tree 1 mirrors
    tree 0), or of the ``trees`` given: the classes of nodes no exact symmetry could merge."""
    from pkbsim.collectives.algorithms import tree_positions

    neighbours: list[list[tuple[int, str, int]]] = [[] for _ in range(k)]
    for which in trees:
        at, _ = tree_positions(k, which)
        for p in range(1, k):
            child, parent = at[p], at[(p - 1) // 2]
            neighbours[child].append((which, "parent", parent))
            neighbours[parent].append((which, "child", child))
    colour = [0] * k
    count = 1
    while True:
        keys = [(colour[x], tuple(sorted((w, rel, colour[y]) for w, rel, y in neighbours[x])))
                for x in range(k)]
        names: dict[tuple[object, ...], int] = {}
        colour = [names.setdefault(key, len(names)) for key in keys]
        if len(names) == count:
            return count
        count = len(names)


@pytest.mark.parametrize("k", [4, 16, 128, 2048])
def test_the_double_binary_tree_leaves_no_two_nodes_alike(k: int) -> None:
    """Why the trees across nodes allow no node shift (docs/simulation.md): no partition of
    the nodes coarser than one class per node is equitable for both trees."""
    assert _refined_classes(k) == k
    if k == 16:  # one tree alone: its levels (and the last level's partial subtree) merge
        assert _refined_classes(15, (0,)) == 4
