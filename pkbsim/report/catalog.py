"""Tables for ``pkbsim topo list|show`` and ``pkbsim tasks list|show``."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.table import Table

from pkbsim.datafiles import display_path
from pkbsim.errors import PkbsimError
from pkbsim.report.text import to_text
from pkbsim.task.schema import CommOp, TaskInstance, TaskSpec
from pkbsim.topology.fabric_kinds import fabric_kinds
from pkbsim.topology.schema import Topology
from pkbsim.units import format_bytes


def _table(*columns: str, title: str | None = None) -> Table:
    table = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
    for col in columns:
        table.add_column(col, overflow="fold")
    return table


def topology_list(topologies: Sequence[tuple[str, Topology | PkbsimError]]) -> str:
    """One line per (name, topology or the error loading it)."""
    table = _table("name", "GPUs", "GPU", "peer GB/s/dir", "NVLS", "HBM GB/s", "mechanisms")
    for name, t in topologies:
        if isinstance(t, PkbsimError):
            table.add_row(name, "", f"error: {t.one_line()}", "", "", "", "")
            continue
        table.add_row(name, f"{t.nodes} x {t.gpus_per_node}", t.gpu.model,
                      f"{t.peer_line_rate_GBps:g}", "yes" if t.scale_up.in_switch_reduction
                      else "no", f"{t.gpu.hbm_bandwidth_GBps:g}", " ".join(t.mechanisms))
    return to_text(table, width=200)


# fields a topology takes from its fabric kinds unless the file sets (and sources) them
KIND_FIELDS = {"scale_up.step_latency_us": "scale_up", "scale_out.step_latency_us": "scale_out"}


def _source(topo: Topology, path: str) -> str:
    best = ""
    for key in topo.sources:
        if (path == key or path.startswith(key + ".")) and len(key) > len(best):
            best = key
    for field, section in KIND_FIELDS.items():
        if (path == field or path.startswith(field + ".")) and not best.startswith(field):
            kind = getattr(topo, section).fabric
            return (f"fabric kind {kind} (topologies/fabrics/{kind}.yaml): "
                    f"{fabric_kinds()[kind].source}")
    return topo.sources.get(best, "")


def _leaves(prefix: str, value: Any) -> list[tuple[str, Any]]:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: list[tuple[str, Any]] = []
        for f in dataclasses.fields(value):
            out += _leaves(f"{prefix}.{f.name}" if prefix else f.name, getattr(value, f.name))
        return out
    if isinstance(value, dict):
        out = []
        for k, v in value.items():
            out += _leaves(f"{prefix}.{k}", v)
        return out
    return [(prefix, value)]


def topology_detail(topo: Topology) -> str:
    up = topo.scale_up
    per_gpu = (f" (scale_up.bandwidth_GBps = {up.links_per_gpu} links x "
               f"scale_up.link_bandwidth_GBps {up.link_bandwidth_GBps:g} GB/s per link)"
               if up.fabric == "nvswitch" else "")
    head = (f"{topo.name}: {topo.description}\nfile {display_path(topo.file)} "
            f"(sha256 {topo.sha256[:12]})\n{topo.nodes} node(s) x {topo.gpus_per_node} GPUs; "
            f"peer line rate {topo.peer_line_rate_GBps:g} GB/s per GPU per direction"
            f"{per_gpu}\n")
    table = _table("field", "value", "source", title="Parameters (units in the names)")
    skip = {"name", "description", "sources", "file", "sha256", "gpus_per_node", "nodes"}
    for f in dataclasses.fields(topo):
        if f.name in skip:
            continue
        value = getattr(topo, f.name)
        if value is None:
            table.add_row(f.name, "none", "")
            continue
        for path, leaf in _leaves(f.name, value):
            if path.endswith(".name") and path.startswith("mechanisms."):
                continue
            shown = f"{leaf:g}" if isinstance(leaf, float) else str(leaf)
            if path == "scale_up.link_bandwidth_GBps":
                table.add_row(path, shown, "per link, per direction: "
                              + _source(topo, path))
                if up.links_per_gpu:
                    table.add_row("scale_up.bandwidth_GBps", f"{up.bandwidth_GBps:g}",
                                  f"per GPU, per direction: links_per_gpu ({up.links_per_gpu}) x "
                                  "link_bandwidth_GBps; not in the file: --set it to scale every "
                                  "link")
                continue
            table.add_row(path, shown, _source(topo, path))
    return head + "\n" + to_text(table)


def task_list(tasks: Sequence[tuple[Path, TaskSpec | PkbsimError]]) -> str:
    """One line per (file, task or the error loading it)."""
    table = _table("id", "name", "alias", "parallelism", "communication (in order)", "presets")
    for path, spec in tasks:
        if isinstance(spec, PkbsimError):
            table.add_row("", path.stem, "", "", f"error: {spec.one_line()}", "")
            continue
        comm = [op.kind for op in spec.ops if op.kind != "compute"]
        table.add_row(str(spec.id), spec.name, " ".join(spec.aliases), spec.parallelism,
                      ", ".join(comm), " ".join(spec.presets))
    return to_text(table, width=200)


def task_detail(spec: TaskSpec, inst: TaskInstance, world_sizes: Sequence[int] = (),
                scanned: int = 0) -> str:
    """``world_sizes``: those from 1 to ``scanned`` the task takes at ``inst``'s preset."""
    alias = f" (alias {', '.join(spec.aliases)})" if spec.aliases else ""
    head = (f"{spec.id} {spec.name}{alias}: {spec.title}\nsource {spec.source}; parallelism "
            f"{spec.parallelism}; file {display_path(spec.file)}\n\n{spec.description.strip()}\n")
    values = _table("name", f"value (W={inst.world_size}, preset {inst.preset})", "meaning",
                    title="Parameters and derived values")
    helps = {p.name: p.help for p in spec.params}
    derived = dict(spec.derived)
    for name, value in inst.values.items():
        meaning = helps.get(name) or (f"= {derived[name]}" if name in derived else
                                      "world size" if name == "W" else "")
        values.add_row(name, f"{value:g}" if isinstance(value, float) else str(value), meaning)
    presets = _table("preset", "world size", "sets", "description / source", title="Presets")
    for p in spec.presets.values():
        presets.add_row(p.name, str(p.world_size or spec.default_world_size),
                        " ".join(f"{k}={v}" for k, v in p.values.items()) or "-",
                        p.description + (f" [{p.source}]" if p.source else ""))
    limits = _table("constraint on W", "why", title="World size")
    for c in spec.constraints:
        limits.add_row(c.check, c.why)
    sizes = _world_sizes(spec, inst.preset, world_sizes, scanned)
    ops = _table("op", "kind", "repeat", "bytes/rank", "FLOPs", "HBM bytes", "group", "after",
                 title=f"Ops at W={inst.world_size}, preset {inst.preset}")
    for op in inst.ops:
        if isinstance(op, CommOp):
            ops.add_row(op.id, op.kind, str(op.repeat), format_bytes(op.bytes_per_rank), "-", "-",
                        f"{op.group} ({op.group_size})", ", ".join(op.after))
        else:
            ops.add_row(op.id, f"compute:{op.kind}", str(op.repeat), "-", f"{op.flops:.4g}",
                        format_bytes(op.hbm_bytes), "-", ", ".join(op.after))
    shown: list[object] = [limits, sizes] if spec.constraints else [sizes]
    return head + "\n" + to_text(values, "", presets, "", *shown, "", ops)


def _world_sizes(spec: TaskSpec, preset: str, sizes: Sequence[int], scanned: int) -> str:
    """What W the task takes: every one, the ones found from 1 to ``scanned``, or none."""
    default = f"default {spec.default_world_size}"
    if not scanned:
        return f"World size: {default}"
    if len(sizes) == scanned:
        why = ("no constraint in the task file" if not spec.constraints
               else "the constraints hold at each")
        return f"World size: any W from 1 to {scanned} at preset {preset} ({why}); {default}"
    if not sizes:
        return (f"World size: none from 1 to {scanned} at preset {preset} (see the constraints "
                f"above); {default}")
    return (f"World sizes from 1 to {scanned} at preset {preset}: {_ranges(sizes)}; {default}")


def _ranges(values: Sequence[int]) -> str:
    """1, 2, 4, 5, 6 -> '1-2, 4-6'."""
    runs: list[list[int]] = []
    for v in values:
        if runs and v == runs[-1][-1] + 1:
            runs[-1].append(v)
        else:
            runs.append([v])
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)
