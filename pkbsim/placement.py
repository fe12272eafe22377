"""Where a comm op's ranks sit and what its bytes load: the concurrent groups and their
placement context, per-link bytes of an algorithm (computed once per fabric for one byte and
scaled), the fabric of a topology, which mechanism can carry which algorithm, and a
mechanism's achievable fraction of line rate per kind of link.

The roofline, the simulator, the validator's predictions and the comparator share these.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

from pkbsim import symmetry
from pkbsim.collectives.base import SWITCH, Algorithm, Context
from pkbsim.symmetry import Classes
from pkbsim.task.schema import REDUCING_KINDS, CommOp
from pkbsim.topology.fabric import NIC, UPLINK_NET, Fabric
from pkbsim.topology.schema import Mechanism, Topology

Loads = dict[str, float]  # link id -> bytes


def group_members(op: CommOp, world_size: int) -> list[list[int]]:
    """Global ranks of each concurrent group the op runs in."""
    g = op.group_size
    count = world_size // g
    if op.group_layout == "strided":
        return [[k + j * count for j in range(g)] for k in range(count)]
    return [list(range(k * g, (k + 1) * g)) for k in range(count)]


def group_context(op: CommOp, members: list[int], topo: Topology) -> Context:
    per_node: dict[int, int] = defaultdict(int)
    for r in members:
        per_node[topo.node_of(r)] += 1
    sizes = set(per_node.values())
    uniform = len(sizes) == 1
    return Context(n=len(members), root=op.root, pattern=op.pattern, nodes=len(per_node),
                   per_node=sizes.pop() if uniform else 0)


def rotating_roots(op: CommOp) -> list[tuple[int, float]]:
    """(root, share of the repeats): a rotating root spreads the repeats over the group."""
    n = op.group_size
    if not op.rotate_root or op.repeat <= 1 or n == 1:
        return [(op.root, 1.0)]
    full, extra = divmod(op.repeat, n)  # roots root .. root + extra - 1 get one repeat more
    counts = [full + ((r - op.root) % n < extra) for r in range(n)]
    return [(r, c / op.repeat) for r, c in enumerate(counts) if c]


def link_loads(alg: Algorithm, op: CommOp, world_size: int, fabric: Fabric) -> Loads:
    """Bytes per link for all repeats; traffic is linear in the buffer size, so the per-byte
    loads of one (algorithm, placement) are computed once per fabric and scaled."""
    roots = tuple(rotating_roots(op))
    key = (alg.name, op.kind, op.group_size, op.group_layout, world_size,
           op.pattern, roots)
    unit = fabric.unit_loads.get(key)
    if unit is None:
        unit = fabric.unit_loads[key] = _unit_loads(alg, op, world_size, fabric, roots)
    scale = op.bytes_per_rank * op.repeat * op.imbalance
    return {link: nbytes * scale for link, nbytes in unit.items()}


def _unit_loads(alg: Algorithm, op: CommOp, world_size: int, fabric: Fabric,
                roots: tuple[tuple[int, float], ...]) -> Loads:
    classes = _classes(alg, op, world_size, fabric.topo, roots)
    if classes is not None:
        return _symmetric_loads(alg, op, fabric, classes)
    loads: Loads = defaultdict(float)
    for members in group_members(op, world_size):
        for root, share in roots:
            ctx = replace(group_context(op, members, fabric.topo), root=root)
            for flow in alg.flows(op.kind, 1.0, ctx):
                src = SWITCH if flow.src == SWITCH else members[flow.src]
                dst = SWITCH if flow.dst == SWITCH else members[flow.dst]
                for link in fabric.route(src, dst):
                    loads[link] += flow.nbytes * share
    return dict(loads)


def _classes(alg: Algorithm, op: CommOp, world_size: int, topo: Topology,
             roots: tuple[tuple[int, float], ...]) -> Classes | None:
    """The classes of ranks an op over the whole world lets its link loads be summed over
    (pkbsim.symmetry), or None: groups, a rotating root, or no symmetry."""
    if op.group_size != world_size or len(roots) != 1:
        return None
    classes = symmetry.start(topo, world_size)
    if not classes.symmetric:
        return None
    members = list(range(world_size))
    ctx = replace(group_context(op, members, topo), root=roots[0][0])
    needs = symmetry.call_steps(classes, alg, op.kind, ctx, [members])
    if needs is not None:
        classes = symmetry.restrict(classes, *needs)
    return classes if classes.symmetric else None


def _symmetric_loads(alg: Algorithm, op: CommOp, fabric: Fabric, classes: Classes) -> Loads:
    """The loads of the flows leaving the representative ranks, each on its representative
    link weighted by the flows it stands for there, then given to every link of the class:
    the loads of every flow, without making them."""
    ctx = replace(group_context(op, list(range(classes.world_size)), fabric.topo),
                  root=op.root)
    rep: Loads = defaultdict(float)
    model: dict[str, str] = {}  # a representative link not routed yet -> a link it stands for
    for flow in alg.flows_from(op.kind, 1.0, ctx, set(classes.ranks)):
        for link in fabric.route(flow.src, flow.dst):
            rep_id, weight = classes.link(link)
            rep[rep_id] += flow.nbytes * weight
            model.setdefault(rep_id, link)
    loads: Loads = {}
    for rep_id, nbytes in rep.items():
        fabric.like(rep_id, model.get(rep_id, rep_id))
        for link in classes.link_members(rep_id):
            loads[fabric.like(link, rep_id)] = nbytes
    return loads


_FABRICS: dict[int, tuple[Topology, Fabric]] = {}


def fabric_for(topo: Topology) -> Fabric:
    """One fabric (and its caches) per topology object."""
    entry = _FABRICS.get(id(topo))
    if entry is None or entry[0] is not topo:
        if len(_FABRICS) >= 64:
            _FABRICS.clear()
        entry = (topo, Fabric(topo))
        _FABRICS[id(topo)] = entry
    return entry[1]


def link_efficiency(topo: Topology, mech: Mechanism, link_kind: str) -> float:
    """A mechanism's achievable fraction of line rate on one kind of link."""
    if link_kind not in (NIC, UPLINK_NET):
        return mech.efficiency
    assert topo.scale_out is not None
    simple = topo.mechanisms.get("nccl_simple")
    protocol = min(1.0, mech.efficiency / simple.efficiency) if (
        simple and mech.name.startswith("nccl_")) else 1.0
    return topo.scale_out.efficiency * protocol


def call_bandwidth_s(alg: Algorithm, mech: Mechanism, op: CommOp, world_size: int,
                     fabric: Fabric) -> float:
    """Busiest link's time for one call of ``op`` (no repeats) on ``mech``."""
    loads = link_loads(alg, replace(op, repeat=1), world_size, fabric)
    by_kind = line_time_by_kind(loads, fabric)
    return max((t / link_efficiency(fabric.topo, mech, kind) for kind, t in by_kind.items()),
               default=0.0)


def network_reduces(topo: Topology) -> bool:
    """The network's switches reduce (InfiniBand SHARP), so CollNet may run."""
    return topo.scale_out is not None and topo.scale_out.in_network_reduction


def fits(alg: Algorithm, mech: Mechanism, kind: str) -> bool:
    """Can ``mech`` carry ``alg`` for this kind (reductions, multicast, multimem)?"""
    traits = mech.traits
    if alg.needs_switch_reduction:
        return traits.switch_reduction
    if alg.needs_multicast:
        return traits.multicast and (not traits.host_initiated or mech.name == "copy_engine")
    if mech.name == "nvls_multimem":
        return False  # multimem instructions address multicast objects only
    return not (kind in REDUCING_KINDS and not traits.reduces)


def line_time_by_kind(loads: Loads, fabric: Fabric) -> dict[str, float]:
    """The busiest link of each kind at line rate; a mechanism's efficiency is per kind."""
    worst: dict[str, float] = {}
    for link_id, nbytes in loads.items():
        link = fabric.link(link_id)
        t = nbytes / link.line_Bps
        if t > worst.get(link.kind, -1.0):
            worst[link.kind] = t
    return worst
