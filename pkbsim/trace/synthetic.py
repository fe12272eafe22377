"""A task made from a trace, for ``pkbsim simulate --trace-file`` without ``--task``: the
roofline and ``custom_best`` see the trace's collectives (those over the whole world) and one
compute op carrying all its kernels' FLOPs and bytes; the reference runs the trace itself."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from pkbsim.task.loader import instantiate, parse_task
from pkbsim.task.schema import TaskInstance
from pkbsim.trace.format import Trace
from pkbsim.trace.program import Program

KINDS = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce",
         "scatter", "gather"}


def task_from_trace(trace: Trace, program: Program, world_size: int | None) -> TaskInstance:
    w = trace.world_size
    totals = program.totals()
    ops: list[dict[str, Any]] = []
    for i, op in enumerate(trace.ops):
        c = op.collective
        if c is None or c.name not in KINDS or c.group_size != w or w == 1 or c.bytes <= 0:
            continue
        ops.append({"id": f"c{i}_{c.name}", "kind": c.name, "bytes_per_rank": c.bytes,
                    "dtype": "bf16"})
    ops.append({"id": "traced_kernels", "kind": "compute", "compute": "other",
                "flops": float(totals.get("flops", 0.0)),
                "hbm_bytes": float(totals.get("bytes", 0.0)),
                "launches": max(1, int(totals.get("kernels", 0)))})
    name = Path(trace.file).stem.replace(".", "_").replace("-", "_") or "traced"
    if not name[0].isalpha():
        name = "t_" + name
    source = str(trace.meta.get("function") or trace.meta.get("target") or name)
    data = {"schema_version": 1, "id": 1, "name": name, "title": f"traced: {trace.file}",
            "source": source, "parallelism": "traced",
            "world_size": {"default": w, "constraints": []},
            "presets": {"pkb": {"description": "the traced size", "source": trace.file}},
            "ops": ops}
    spec = replace(parse_task(data, trace.file), traced_from=_short(source))  # no PKB id
    return instantiate(spec, world_size or w, "pkb")


def _short(source: str) -> str:
    """``FILE.py:FUNCTION`` with the file's name alone (the trace file gives its path)."""
    file, sep, function = source.rpartition(":")
    return f"{Path(file).name}:{function}" if sep and file.endswith(".py") else source
