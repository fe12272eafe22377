"""Published nccl-tests results (tests/data/nccl_tests) against the model's nccl_reference.

Each file is one source: its URL, hardware and NCCL version, a ``model`` block naming the
shipped topology that describes that hardware (with ``set`` fields for what differs: node
count, NIC rate), and tables of nccl-tests rows ``[size_bytes, time_us, algbw_GBps,
busbw_GBps]`` as printed. Each row is predicted as nccl-tests runs it: the bare collective,
NCCL's own choice (or the run's NCCL_ALGO / NCCL_PROTO), issued from a C loop (host model
``nccl-tests``), steady state over back-to-back calls. Nothing here is fitted: the report shows
how far the model is from each table. Pure: loads, computes, returns rows.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pkbsim.collectives.bandwidth import size_bytes
from pkbsim.errors import PkbsimError, TopologyError, UsageError
from pkbsim.fields import Fields, load_yaml
from pkbsim.planning.evaluate import collective_spec
from pkbsim.sim import SimOptions, Strategy, simulate
from pkbsim.sim.strategies import OpOverride
from pkbsim.task.loader import instantiate
from pkbsim.task.schema import COMM_KINDS
from pkbsim.topology.loader import apply_overrides, find_topology, parse_topology
from pkbsim.topology.schema import Topology

HALVES = ("fit", "report")
REGIMES = ((0, 64 * 1024, "< 64 KiB"), (64 * 1024, 2**20, "64 KiB - 1 MiB"),
           (2**20, float("inf"), ">= 1 MiB"))
ALGOS = {"ring": "ring", "tree": "nccl_tree", "nvls": "nvls", "nvlstree": "nvls_tree",
         "collnetchain": "collnet", "collnetdirect": "collnet", "collnet": "collnet"}
PROTOS = {"ll": "LL", "ll128": "LL128", "simple": "Simple"}


@dataclass(frozen=True)
class Table:
    file: str
    machine: str  # a short label: GPU, nodes x GPUs per node
    url: str
    nccl_version: str
    topology: str
    sets: tuple[tuple[str, Any], ...]
    replace: tuple[tuple[str, Any], ...]  # whole sections (node, scale_out) the source describes
    env: tuple[tuple[str, str], ...]
    kind: str
    world_size: int
    rows: tuple[tuple[float, float], ...]  # (size_bytes as printed, time_us)
    half: str = "report"  # fit or report (docs/measurements/nccl_tests_published.md)
    nodes: int = 1  # NVLink domains the run spans (1: one node, however many GPUs)
    fabric: str = "nvswitch"  # the network's fabric kind across nodes, else the scale-up one
    excluded: str = ""  # why the source is in neither half (its own text shows a broken run)

    @property
    def scope(self) -> str:
        return "one node" if self.nodes == 1 else "multi-node"


@dataclass(frozen=True)
class Row:
    table: Table
    size_bytes: float
    measured_us: float
    predicted_us: float | None
    error: str | None = None
    protocol: str | None = None  # the protocol NCCL ran the call with

    @property
    def rel_error(self) -> float | None:
        if self.predicted_us is None or self.measured_us <= 0:
            return None
        return (self.predicted_us - self.measured_us) / self.measured_us

    @property
    def regime(self) -> str:
        return next(name for lo, hi, name in REGIMES if lo <= self.size_bytes < hi)


def load_tables(folder: str | Path) -> list[Table]:
    """Every table of every ``*.yaml`` under ``folder`` (sorted by file)."""
    out: list[Table] = []
    for path in sorted(Path(folder).glob("*.yaml")):
        data, _sha = load_yaml(path, UsageError)
        f = Fields(data, str(path), "", UsageError)
        src = f.sub("source")
        model = f.sub("model")
        topology = model.text("topology")
        sets = tuple(sorted((str(k), v) for k, v in model.items("set")))
        whole = []
        for section in ("node", "scale_out"):
            if model.has(section):
                value = model.raw(section)
                if not isinstance(value, Mapping):
                    raise model.fail(section, "expected a mapping of the section's fields")
                whole.append((section, dict(value)))
        model.raw("why", None)
        model.done()
        half = f.text("half", choices=HALVES)
        excluded = f.text("excluded") if f.has("excluded") else ""
        f.raw("excluded", None)
        env = tuple(sorted((str(k), str(v)) for k, v in src.items("env")))
        machine = (f"{src.text('gpu')} {src.integer('nodes', lo=1)} x "
                   f"{src.integer('gpus_per_node', lo=1)}")
        url, version = src.text("url"), str(src.raw("nccl_version", "unknown"))
        for key in ("title", "posted", "hardware", "nics_per_node", "nic_Gbps", "notes"):
            src.raw(key, None)
        src.done()
        for t in f.seq("tables"):
            kind = t.text("collective", choices=COMM_KINDS)
            world = t.integer("world_size", lo=1)
            t.raw("dtype", None)
            t.raw("column", None)
            rows = []
            for i, row in enumerate(t.raw("rows")):
                if not (isinstance(row, list) and len(row) == 4 and all(
                        isinstance(v, int | float) and not isinstance(v, bool) for v in row)):
                    raise t.fail(f"rows[{i}]", "expected [size_bytes, time_us, algbw_GBps, "
                                 "busbw_GBps]")
                rows.append((float(row[0]), float(row[1])))
            t.done()
            out.append(Table(str(path), machine, url, version, topology, sets, tuple(whole),
                             env, kind, world, tuple(rows), half, excluded=excluded))
        f.done()
    return [_placed(t) for t in out]


def _placed(table: Table) -> Table:
    """The table with the node count and fabric kind of the topology that models it."""
    try:
        _strategy, sets = strategy_for(table)
        topo = topology_for(table, sets)
    except PkbsimError:
        return table  # predict_row reports it
    g = topo.gpus_per_node
    nodes = -(-table.world_size // g)
    fabric = (topo.scale_out.fabric if nodes > 1 and topo.scale_out is not None
              else topo.scale_up.fabric)
    return replace(table, nodes=nodes, fabric=fabric)


def strategy_for(table: Table) -> tuple[Strategy, dict[str, Any]]:
    """nccl_reference issued from a C loop, with the run's NCCL_ALGO / NCCL_PROTO forced and
    NCCL_NVLS_ENABLE=0 as a machine without in-switch reduction."""
    env = {k.upper(): v for k, v in table.env}
    sets: dict[str, Any] = dict(table.sets)
    algo = proto = None
    if "NCCL_ALGO" in env:
        algo = ALGOS.get(env["NCCL_ALGO"].lower())
        if algo is None:
            raise UsageError(f"NCCL_ALGO={env['NCCL_ALGO']} has no model counterpart")
    if "NCCL_PROTO" in env:
        proto = PROTOS.get(env["NCCL_PROTO"].lower())
        if proto is None:
            raise UsageError(f"NCCL_PROTO={env['NCCL_PROTO']} has no model counterpart")
    if env.get("NCCL_NVLS_ENABLE") == "0":
        sets["scale_up.in_switch_reduction"] = False
    overrides = {"call": OpOverride(algorithm=algo, protocol=proto)} if algo or proto else {}
    return Strategy("nccl_reference", overrides, host_model="nccl-tests"), sets


def topology_for(table: Table, sets: Mapping[str, Any]) -> Topology:
    """The shipped topology with the source's own sections (node, scale_out) in place, then
    the ``set`` fields."""
    path = find_topology(table.topology)
    data, sha = load_yaml(path, TopologyError)
    merged = dict(data)
    for section, fields in table.replace:
        merged[section] = {**(merged.get(section) or {}), **fields}
    if sets:
        merged = apply_overrides(merged, sets, str(path))
    return parse_topology(merged, str(path), sha)


def predict_row(table: Table, size: float, measured_us: float,
                extra_sets: Mapping[str, Any] | None = None) -> Row:
    """One row predicted; ``extra_sets`` are topology fields set on top of the table's own
    (the fit tries constants this way)."""
    try:
        strategy, sets = strategy_for(table)
        topo = topology_for(table, {**sets, **(extra_sets or {})})
        per_rank = size / size_bytes(table.kind, 1.0, table.world_size)
        inst = instantiate(collective_spec(table.kind), table.world_size, "pkb",
                           {"size": max(per_rank, 1.0)})
        result = simulate(inst, topo, strategy, SimOptions(iterations=3))
        choice = result.ops[0].choice if result.ops else None
        return Row(table, size, measured_us, result.predicted_us,
                   protocol=choice.protocol if choice is not None else None)
    except PkbsimError as exc:
        return Row(table, size, measured_us, None, exc.one_line())


def _predict(args: tuple[Table, float, float, Mapping[str, Any] | None]) -> Row:
    return predict_row(*args)


def predict_all(tables: Iterable[Table], jobs: int = 1) -> list[Row]:
    work = [(t, s, m, None) for t in tables for s, m in t.rows if s > 0 and m > 0]
    return predict_many(work, jobs)


def predict_many(work: Sequence[tuple[Table, float, float, Mapping[str, Any] | None]],
                 jobs: int = 1) -> list[Row]:
    """Rows (table, size, measured, extra sets) predicted, in order."""
    if jobs <= 1:
        return [_predict(w) for w in work]
    with ProcessPoolExecutor(jobs) as pool:
        return list(pool.map(_predict, work, chunksize=4))


@dataclass(frozen=True)
class Summary:
    group: str
    rows: int
    median_abs: float
    within_25: float  # share of rows within 25%
    signed_median: float


def summarize(rows: Iterable[Row], key: Mapping[str, Any] | None = None,
              by: str = "regime") -> list[Summary]:
    """Median |error| per value of ``by`` (regime, kind, machine, file)."""
    groups: dict[str, list[float]] = {}
    for r in rows:
        e = r.rel_error
        if e is None:
            continue
        name = {"regime": r.regime, "kind": r.table.kind, "machine": r.table.machine,
                "file": Path(r.table.file).name, "all": "all", "half": r.table.half,
                "scope": r.table.scope, "fabric": r.table.fabric,
                "scope_regime": f"{r.table.scope}, {r.regime}"}[by]
        groups.setdefault(name, []).append(e)
    out = []
    order = ([name for _lo, _hi, name in REGIMES] if by == "regime" else
             [f"{scope}, {name}" for scope in ("one node", "multi-node")
              for _lo, _hi, name in REGIMES] if by == "scope_regime" else sorted(groups))
    for name in order:
        errs = groups.get(name)
        if not errs:
            continue
        out.append(Summary(name, len(errs), statistics.median(abs(e) for e in errs),
                           sum(abs(e) <= 0.25 for e in errs) / len(errs),
                           statistics.median(errs)))
    return out
