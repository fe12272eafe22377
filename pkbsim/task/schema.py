"""A task as written (``TaskSpec``, with expressions) and as instantiated (``TaskInstance``).

Sizes in an instance are plain numbers: bytes, FLOPs. ``bytes_per_rank`` follows nccl-tests:
the size of the buffer this rank hands to the collective (all-gather: its shard; reduce-scatter
and all-to-all: its whole input; scatter/gather: one rank's chunk; send/recv: bytes sent to
each peer of the pattern).
"""

from __future__ import annotations

from dataclasses import dataclass, field

COMM_KINDS = (
    "all_reduce", "all_gather", "reduce_scatter", "all_to_all",
    "broadcast", "reduce", "scatter", "gather", "send_recv",
)
ROOTED_KINDS = ("broadcast", "reduce", "scatter", "gather")
REDUCING_KINDS = ("all_reduce", "reduce_scatter", "reduce")
REDUCE_OPS = ("sum", "avg", "max", "min", "prod")
COMPUTE_KINDS = ("gemm", "elementwise", "reduction", "sort", "fft", "gather_scatter", "copy",
                 "attention", "conv", "scan", "other")
SEND_RECV_PATTERNS = ("ring", "bidir_ring", "pairs")
GROUP_LAYOUTS = ("contiguous", "strided")
Expr = str | int | float


@dataclass(frozen=True)
class ParamSpec:
    name: str
    value: float | int
    help: str = ""
    integer: bool = False  # written as an integer (1024, not 1024.0): whole numbers only


@dataclass(frozen=True)
class PresetSpec:
    name: str
    description: str
    source: str
    values: dict[str, float | int] = field(hash=False)
    world_size: int | None = None
    production: bool = False  # the task's production-size preset (``--preset production``)


@dataclass(frozen=True)
class ConstraintSpec:
    check: str
    why: str


@dataclass(frozen=True)
class GroupSpec:
    name: str
    size: Expr
    layout: str  # contiguous: ranks [k*size, (k+1)*size); strided: ranks {i, i+W/size, ...}


@dataclass(frozen=True)
class OpSpec:
    """One op as written: expressions stay text until the task is instantiated."""

    id: str
    kind: str  # a COMM_KINDS entry, or "compute"
    fields: dict[str, object] = field(hash=False)
    after: tuple[str, ...] | None  # None = the previous op
    field_path: str = ""


@dataclass(frozen=True)
class TaskSpec:
    id: int
    name: str
    aliases: tuple[str, ...]
    title: str
    source: str
    parallelism: str
    description: str
    default_world_size: int
    constraints: tuple[ConstraintSpec, ...]
    params: tuple[ParamSpec, ...]
    derived: tuple[tuple[str, Expr], ...]
    presets: dict[str, PresetSpec] = field(hash=False)
    groups: dict[str, GroupSpec] = field(hash=False)
    ops: tuple[OpSpec, ...] = ()
    notes: str = ""
    file: str = ""
    sha256: str = ""
    traced_from: str = ""  # a task made from a trace (no PKB problem): what was traced

    @property
    def key(self) -> str:
        """The file stem: ``<id>_<name>`` (a task made from a trace: its name)."""
        return self.name if self.traced_from else f"{self.id}_{self.name}"

    @property
    def label(self) -> str:
        """How reports name the task: ``Task 83 grpo``, or ``Traced FILE.py:FUNCTION`` for a
        task made from a trace, which has no PKB problem id."""
        if self.traced_from:
            return f"Traced {self.traced_from}"
        return f"Task {self.id} {self.name}"

    @property
    def problem_id(self) -> int | None:
        """PKB's problem id; None for a task made from a trace."""
        return None if self.traced_from else self.id

    @property
    def production_preset(self) -> str | None:
        """The preset marked ``production: true``, if any."""
        return next((p.name for p in self.presets.values() if p.production), None)

    def settable(self) -> list[str]:
        return [p.name for p in self.params] + [name for name, _ in self.derived]


@dataclass(frozen=True)
class CommOp:
    id: str
    kind: str
    bytes_per_rank: float
    dtype: str
    group: str
    group_size: int
    group_layout: str
    root: int
    reduce_op: str | None
    pattern: str | None  # send_recv only
    data_dependent: bool
    imbalance: float  # largest rank's bytes over the mean (data-dependent ops)
    repeat: int
    chain: bool  # repeated instances depend on each other
    after: tuple[str, ...]
    host_syncs: int  # host synchronisations the reference makes at this op
    api: str
    note: str
    rotate_root: bool = False  # repeat i uses root (root + i) mod group size (rooted kinds)

    category = "comm"


@dataclass(frozen=True)
class ComputeOp:
    id: str
    kind: str  # a COMPUTE_KINDS entry
    flops: float
    hbm_bytes: float
    dtype: str
    tensor_core: bool
    repeat: int
    chain: bool
    after: tuple[str, ...]
    host_syncs: int
    launches: int  # kernels the reference launches for this op (per repeat)
    note: str
    ranks: str = "all"  # which ranks run it: all, root, or non_root
    root: int = 0  # the root rank, for ranks: root / non_root
    imbalance: float = 1.0  # the busiest rank's FLOPs and bytes over the mean (>= 1)

    category = "compute"

    def runs_on(self, rank: int) -> bool:
        if self.ranks == "root":
            return rank == self.root
        if self.ranks == "non_root":
            return rank != self.root
        return True


Op = CommOp | ComputeOp


@dataclass(frozen=True)
class TaskInstance:
    """A task at one world size and preset, with every expression evaluated."""

    spec: TaskSpec
    world_size: int
    preset: str
    values: dict[str, float | int] = field(hash=False)  # every parameter and derived value
    overrides: dict[str, float | int] = field(hash=False)
    ops: tuple[Op, ...] = ()

    def op(self, op_id: str) -> Op:
        for op in self.ops:
            if op.id == op_id:
                return op
        raise KeyError(op_id)
