"""Every shipped task on one topology at once: one row per task, a summary. No printing.

``pkbsim analyze --all`` renders an :class:`Overview`; metrics.md section "Overview" defines
each column.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from pkbsim.errors import InfeasibleError, UsageError
from pkbsim.roofline import Roofline, roofline
from pkbsim.task.loader import PRODUCTION, instantiate, list_tasks, load_task
from pkbsim.task.schema import CommOp, TaskInstance, TaskSpec
from pkbsim.topology.schema import Topology

BINDINGS = ("comm", "memory", "compute", "latency")
SORT_KEYS = ("id", "name", "parallelism", "bytes", "t_comm", "t_mem", "t_comp", "t_latency",
             "t_roof", "binding")
FILTER_KEYS = ("id", "name", "parallelism", "source", "binding", "data_dependent")


@dataclass(frozen=True)
class OverviewRow:
    """One task: its bounds, or why it was not analysed at this size."""

    spec: TaskSpec
    preset: str
    instance: TaskInstance | None
    roofline: Roofline | None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.roofline is not None

    @property
    def world_size(self) -> int | None:
        return self.instance.world_size if self.instance else None

    @property
    def comm_ops(self) -> list[CommOp]:
        return [op for op in self.instance.ops if isinstance(op, CommOp)] if self.instance \
            else []

    @property
    def buffer_bytes_per_rank(self) -> float:
        """Sum over comm ops of the buffer handed to the collective (nccl-tests size) x repeat."""
        return sum(op.bytes_per_rank * op.repeat for op in self.comm_ops)

    @property
    def moved_bytes_per_rank(self) -> float:
        """Sum over comm ops of the busiest GPU port's bytes under the op's bound algorithm."""
        if self.roofline is None:
            return 0.0
        return sum(max(b.egress_bytes, b.ingress_bytes, b.nic_bytes) for b in self.roofline.comm)

    @property
    def host_syncs(self) -> int:
        """Host synchronisations the reference makes (all ops, all repeats)."""
        if self.instance is None:
            return 0
        return sum(op.host_syncs * op.repeat for op in self.instance.ops)

    @property
    def data_dependent(self) -> bool:
        return any(op.data_dependent for op in self.comm_ops)

    @property
    def binding(self) -> str:
        return self.roofline.binding if self.roofline else "not analysed"


@dataclass(frozen=True)
class Summary:
    analysed: int
    not_analysed: int
    bound_by: dict[str, int] = field(hash=False)
    median_t_roof_s: float
    median_moved_bytes: float


@dataclass(frozen=True)
class Overview:
    topology: Topology
    world_size: int | None  # as asked; None = each task's own
    preset: str  # as asked; "production" = each task's production preset
    rows: tuple[OverviewRow, ...]
    filters: tuple[tuple[str, str], ...] = ()
    sort: str = "id"
    reverse: bool = False
    topology_overrides: dict[str, object] = field(default_factory=dict, hash=False)

    @property
    def analysed(self) -> list[OverviewRow]:
        return [r for r in self.rows if r.ok]

    @property
    def not_analysed(self) -> list[OverviewRow]:
        return [r for r in self.rows if not r.ok]

    def summary(self) -> Summary:
        done = self.analysed
        counts = {b: sum(1 for r in done if r.binding == b) for b in BINDINGS}
        roofs = [r.roofline.t_roof_s for r in done if r.roofline]
        moved = [r.moved_bytes_per_rank for r in done]
        return Summary(len(done), len(self.rows) - len(done), counts,
                       statistics.median(roofs) if roofs else 0.0,
                       statistics.median(moved) if moved else 0.0)


# ------------------------------------------------------------------ filters

def parse_filters(items: Sequence[str]) -> tuple[tuple[str, str], ...]:
    out = []
    for item in items:
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not value:
            raise UsageError(f"--filter {item!r}: expected KEY=VALUE, e.g. parallelism=EP")
        if key not in FILTER_KEYS:
            raise UsageError(f"--filter {item!r}: unknown key {key!r}; keys: "
                             + ", ".join(FILTER_KEYS))
        if key == "binding" and value not in (*BINDINGS, "not_analysed"):
            raise UsageError(f"--filter {item!r}: binding is one of "
                             + ", ".join((*BINDINGS, "not_analysed")))
        if key == "id":
            _id_set(value, item)
        out.append((key, value))
    return tuple(out)


def parallelism_tokens(text: str) -> set[str]:
    """``"CPxTP"`` -> {cp, tp}; ``"TP<->SP"`` -> {tp, sp}; ``"FSDP+EP"`` -> {fsdp, ep}."""
    text = re.sub(r"(?<=[A-Z])x(?=[A-Z])", " ", text)
    return {t.lower() for t in re.split(r"[^A-Za-z0-9]+", text) if t}


def _id_set(value: str, item: str) -> set[int]:
    ids: set[int] = set()
    for part in value.split(","):
        lo, dash, hi = part.partition("-")
        try:
            ids.update(range(int(lo), int(hi) + 1) if dash else {int(lo)})
        except ValueError:
            raise UsageError(f"--filter {item!r}: ids are numbers or ranges, e.g. "
                             "id=1-8,25") from None
    return ids


def _matches(row: OverviewRow, key: str, value: str) -> bool:
    spec = row.spec
    want = value.lower()
    if key == "id":
        return spec.id in _id_set(value, f"id={value}")
    if key == "parallelism":
        return all(t in parallelism_tokens(spec.parallelism) for t in parallelism_tokens(value))
    if key == "binding":
        return row.binding == value.replace("_", " ")
    if key == "data_dependent":
        return row.data_dependent == (want in ("1", "true", "yes"))
    text = spec.name if key == "name" else spec.source
    return want in text.lower()


# ------------------------------------------------------------------ sorting

def _sort_key(key: str) -> Callable[[OverviewRow], tuple[object, ...]]:
    def term(row: OverviewRow, pick: Callable[[Roofline], float]) -> float:
        return pick(row.roofline) if row.roofline else float("inf")

    keys: dict[str, Callable[[OverviewRow], object]] = {
        "id": lambda r: r.spec.id,
        "name": lambda r: r.spec.name,
        "parallelism": lambda r: r.spec.parallelism.lower(),
        "bytes": lambda r: r.moved_bytes_per_rank,
        "t_comm": lambda r: term(r, lambda x: x.t_comm_s),
        "t_mem": lambda r: term(r, lambda x: x.t_mem_s),
        "t_comp": lambda r: term(r, lambda x: x.t_comp_s),
        "t_latency": lambda r: term(r, lambda x: x.t_latency_floor_s),
        "t_roof": lambda r: term(r, lambda x: x.t_roof_s),
        "binding": lambda r: r.binding,
    }
    if key not in keys:
        raise UsageError(f"--sort {key!r}: expected one of {', '.join(SORT_KEYS)}")
    pick = keys[key]
    return lambda r: (pick(r), r.spec.id)


# ------------------------------------------------------------------ building

def load_specs() -> list[TaskSpec]:
    return [load_task(str(path)) for path in list_tasks()]


def analyse_row(spec: TaskSpec, topo: Topology, world_size: int | None, preset: str
                ) -> OverviewRow:
    """One task's bounds; a size it cannot take becomes a row with the reason."""
    name = spec.production_preset if preset == PRODUCTION else preset
    if name is None:
        return OverviewRow(spec, "-", None, None, "no production preset")
    if name not in spec.presets:
        return OverviewRow(spec, name, None, None, f"no preset {name!r}")
    try:
        inst = instantiate(spec, world_size, name)
    except InfeasibleError as exc:
        return OverviewRow(spec, name, None, None, exc.message)
    try:
        return OverviewRow(spec, name, inst, roofline(inst, topo))
    except InfeasibleError as exc:
        return OverviewRow(spec, name, inst, None, exc.message)


def overview(topo: Topology, world_size: int | None = None, preset: str = "pkb",
             filters: Sequence[tuple[str, str]] = (), sort: str = "id", reverse: bool = False,
             specs: Sequence[TaskSpec] | None = None,
             topology_overrides: Mapping[str, object] | None = None) -> Overview:
    """Bounds of every task (or ``specs``) on ``topo``, filtered and sorted."""
    if world_size is not None and world_size < 1:
        raise UsageError(f"--world-size must be at least 1, got {world_size}")
    key = _sort_key(sort)
    rows = [analyse_row(s, topo, world_size, preset) for s in (specs or load_specs())]
    rows = [r for r in rows if all(_matches(r, k, v) for k, v in filters)]
    done = sorted((r for r in rows if r.ok), key=key, reverse=reverse)
    rest = sorted((r for r in rows if not r.ok), key=lambda r: r.spec.id)
    return Overview(topo, world_size, preset, (*done, *rest), tuple(filters), sort, reverse,
                    dict(topology_overrides or {}))
