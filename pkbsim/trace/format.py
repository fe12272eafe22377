"""The trace file: format ``pkbsim-trace``, version 1 (docs/trace.md).

A JSON object ``{"format": "pkbsim-trace", "version": 1, "meta": {...}, "ops": [...]}``; each
op is what one rank's PyTorch dispatched, in order. Loading checks every field once and turns
the file into frozen dataclasses; a bad file is one ``UsageError`` naming the file and field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pkbsim.errors import UsageError
from pkbsim.inputs import loads_json, read_text
from pkbsim.trace.classes import HOST_CLASSES

FORMAT = "pkbsim-trace"
VERSION = 1
MODES = ("fake", "real")  # meta.mode: how it was recorded, as ``pkbsim trace --mode`` names it
OLD_MODES = {"cpu": "real"}  # what files written before said
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast",
               "reduce", "gather", "scatter", "send", "recv", "barrier", "other")


@dataclass(frozen=True)
class Collective:
    name: str  # one of COLLECTIVES
    group_size: int
    bytes: int  # bytes this rank hands over (input side; nccl-tests' message size)
    group_ranks: tuple[int, ...] = ()
    in_splits: tuple[int, ...] = ()  # all_to_all: elements per peer, as passed
    out_splits: tuple[int, ...] = ()


@dataclass(frozen=True)
class TraceOp:
    op: str  # aten.mm.default, c10d.allreduce_.default, Tensor.tolist, ...
    host_class: str  # view | kernel | library | collective | sync
    kind: str  # kernel kind, "" when no kernel runs
    kernels: int  # device kernels it launches
    read_bytes: int
    write_bytes: int
    flops: int
    tensor_core: bool = False  # a GEMM-like op in a type tensor cores run (bf16, fp16, fp8, tf32)
    sync: bool = False  # the host waits for the device
    shapes: tuple[str, ...] = ()  # "bf16[1024,1024]" per tensor input, then "->", outputs
    collective: Collective | None = None


@dataclass(frozen=True)
class Trace:
    meta: dict[str, Any] = field(hash=False)
    ops: tuple[TraceOp, ...]
    file: str = ""

    @property
    def world_size(self) -> int:
        return int(self.meta["world_size"])


def op_to_dict(op: TraceOp) -> dict[str, Any]:
    out: dict[str, Any] = {"op": op.op, "class": op.host_class}
    if op.kind:
        out.update(kind=op.kind, kernels=op.kernels)
    for key, value in (("read_bytes", op.read_bytes), ("write_bytes", op.write_bytes),
                       ("flops", op.flops)):
        if value:
            out[key] = value
    if op.tensor_core:
        out["tensor_core"] = True
    if op.sync:
        out["sync"] = True
    if op.shapes:
        out["shapes"] = list(op.shapes)
    if op.collective is not None:
        c = op.collective
        coll: dict[str, Any] = {"name": c.name, "group_size": c.group_size, "bytes": c.bytes}
        if c.group_ranks:
            coll["group_ranks"] = list(c.group_ranks)
        if c.in_splits:
            coll["in_splits"] = list(c.in_splits)
        if c.out_splits:
            coll["out_splits"] = list(c.out_splits)
        out["collective"] = coll
    return out


def recorded_mode(value: object) -> str | None:
    """A recorded ``mode`` in today's words (``cpu`` is an older file's ``real``); None where
    it is none of them."""
    name = OLD_MODES.get(value, value) if isinstance(value, str) else None
    return name if name in MODES else None


def trace_to_dict(trace: Trace) -> dict[str, Any]:
    return {"format": FORMAT, "version": VERSION, "meta": trace.meta,
            "ops": [op_to_dict(op) for op in trace.ops]}


class _Reader:
    def __init__(self, file: str) -> None:
        self.file = file

    def fail(self, where: str, why: str) -> UsageError:
        return UsageError(why, file=self.file, field=where)

    def int_(self, obj: dict[str, Any], key: str, where: str, default: int | None = None) -> int:
        value = obj.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise self.fail(f"{where}.{key}", f"expected a non-negative integer, got {value!r}")
        return value

    def ints(self, obj: dict[str, Any], key: str, where: str) -> tuple[int, ...]:
        value = obj.get(key, [])
        if not isinstance(value, list) or any(isinstance(v, bool) or not isinstance(v, int)
                                              or v < 0 for v in value):
            raise self.fail(f"{where}.{key}", "expected a list of non-negative integers")
        return tuple(value)

    def op(self, raw: Any, where: str) -> TraceOp:
        if not isinstance(raw, dict):
            raise self.fail(where, "expected an object")
        name = raw.get("op")
        if not isinstance(name, str) or not name:
            raise self.fail(f"{where}.op", "expected the operator's name")
        cls = raw.get("class")
        if cls not in HOST_CLASSES:
            raise self.fail(f"{where}.class", f"expected one of {', '.join(HOST_CLASSES)}, "
                            f"got {cls!r}")
        kind = raw.get("kind", "")
        if not isinstance(kind, str):
            raise self.fail(f"{where}.kind", "expected a string")
        shapes = raw.get("shapes", [])
        if not isinstance(shapes, list) or not all(isinstance(s, str) for s in shapes):
            raise self.fail(f"{where}.shapes", "expected a list of strings")
        coll = None
        if "collective" in raw:
            c = raw["collective"]
            cw = f"{where}.collective"
            if not isinstance(c, dict) or c.get("name") not in COLLECTIVES:
                raise self.fail(f"{cw}.name", f"expected one of {', '.join(COLLECTIVES)}")
            size = self.int_(c, "group_size", cw)
            if size < 1:
                raise self.fail(f"{cw}.group_size", "expected at least 1")
            coll = Collective(c["name"], size, self.int_(c, "bytes", cw),
                              self.ints(c, "group_ranks", cw), self.ints(c, "in_splits", cw),
                              self.ints(c, "out_splits", cw))
        if (cls == "collective") != (coll is not None):
            raise self.fail(f"{where}.collective", "a collective op, and only one, has it")
        return TraceOp(name, cls, kind, self.int_(raw, "kernels", where, 0),
                       self.int_(raw, "read_bytes", where, 0),
                       self.int_(raw, "write_bytes", where, 0), self.int_(raw, "flops", where, 0),
                       bool(raw.get("tensor_core", False)), bool(raw.get("sync", False)),
                       tuple(shapes), coll)


def trace_from_dict(data: Any, file: str) -> Trace:
    reader = _Reader(file)
    if not isinstance(data, dict):
        raise reader.fail("(top level)", "expected a JSON object")
    if data.get("format") != FORMAT:
        raise reader.fail("format", f"expected {FORMAT!r}, got {data.get('format')!r}")
    if data.get("version") != VERSION:
        raise reader.fail("version", f"this pkbsim reads version {VERSION}, "
                          f"got {data.get('version')!r}")
    meta = data.get("meta")
    if not isinstance(meta, dict):
        raise reader.fail("meta", "expected an object")
    w = meta.get("world_size")
    if isinstance(w, bool) or not isinstance(w, int) or w < 1:
        raise reader.fail("meta.world_size", f"expected a positive integer, got {w!r}")
    if "mode" in meta:
        mode = recorded_mode(meta["mode"])
        if mode is None:
            raise reader.fail("meta.mode", f"expected one of {', '.join(MODES)}, "
                              f"got {meta['mode']!r}")
        meta = {**meta, "mode": mode}
    ops = data.get("ops")
    if not isinstance(ops, list):
        raise reader.fail("ops", "expected a list")
    return Trace(meta, tuple(reader.op(raw, f"ops[{i}]") for i, raw in enumerate(ops)), file)


def load_trace(path: str | Path) -> Trace:
    file = str(path)
    return trace_from_dict(loads_json(read_text(path), file=file), file)
