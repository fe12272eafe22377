"""A reference program: a trace folded into what the simulator charges (pure, no torch).

The ops of one rank's trace become ``Segment``s: the host operators issued between two
boundaries (counted per host class), the kernels they launch (grouped by kind, bytes and
FLOPs), and the boundary that ends the segment: a collective, a device-to-host sync, or the
end of the call. Identical consecutive segments are stored once with a count (``times``).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from typing import Any

from pkbsim.trace.classes import HOST_CLASSES
from pkbsim.trace.format import Collective, Trace

KERNEL_FIELDS = ("kind", "tensor_core", "bytes", "flops", "count")


@dataclass(frozen=True)
class KernelGroup:
    kind: str
    tensor_core: bool
    bytes: float  # read plus written, per kernel
    flops: float  # per kernel
    count: float  # kernels


@dataclass(frozen=True)
class Segment:
    host: tuple[tuple[str, float], ...]  # (host class, operators), classes in HOST_CLASSES order
    kernels: tuple[KernelGroup, ...]
    end: str  # collective | sync | end
    collective: Collective | None = None
    times: int = 1

    def host_count(self, cls: str) -> float:
        return dict(self.host).get(cls, 0.0)

    @property
    def kernel_count(self) -> float:
        return sum(k.count for k in self.kernels)


@dataclass(frozen=True)
class Program:
    segments: tuple[Segment, ...]
    meta: dict[str, Any] = field(hash=False, default_factory=dict)

    def totals(self) -> dict[str, float]:
        """Operators per host class, kernels, bytes and FLOPs over the whole call."""
        out: dict[str, float] = defaultdict(float)
        for seg in self.segments:
            for cls, n in seg.host:
                out[cls] += n * seg.times
            if seg.end == "collective":
                out["collective"] += seg.times
            elif seg.end == "sync":
                out["sync"] += seg.times
            for k in seg.kernels:
                out["kernels"] += k.count * seg.times
                out["bytes"] += k.bytes * k.count * seg.times
                out["flops"] += k.flops * k.count * seg.times
        return dict(out)

    def scaled(self, bytes_ratio: float, flops_ratio: float, comm_ratio: float) -> Program:
        """The same operators with every kernel's bytes and FLOPs and every collective's bytes
        scaled (a size other than the traced one)."""
        if bytes_ratio == flops_ratio == comm_ratio == 1.0:
            return self
        segs = []
        for seg in self.segments:
            coll = seg.collective
            if coll is not None and comm_ratio != 1.0:
                coll = replace(coll, bytes=round(coll.bytes * comm_ratio))
            segs.append(replace(seg, collective=coll, kernels=tuple(
                replace(k, bytes=k.bytes * bytes_ratio, flops=k.flops * flops_ratio)
                for k in seg.kernels)))
        return Program(tuple(segs), self.meta)


def program_of(trace: Trace) -> Program:
    """Fold a trace into segments."""
    segments: list[Segment] = []
    host: Counter[str] = Counter()
    kernels: Counter[tuple[str, bool, int, int]] = Counter()

    def close(end: str, collective: Collective | None = None) -> None:
        seg = Segment(tuple((c, float(host[c])) for c in HOST_CLASSES if host[c]),
                      tuple(KernelGroup(kind, tc, float(b), float(f), float(n))
                            for (kind, tc, b, f), n in sorted(kernels.items())),
                      end, collective)
        if segments and _same(segments[-1], seg):
            segments[-1] = replace(segments[-1], times=segments[-1].times + 1)
        else:
            segments.append(seg)
        host.clear()
        kernels.clear()

    for op in trace.ops:
        if op.host_class == "collective":
            close("collective", op.collective)
            continue
        if op.kernels:
            per = op.kernels
            kernels[(op.kind, op.tensor_core, (op.read_bytes + op.write_bytes) // per,
                     op.flops // per)] += per
        if op.sync:
            if op.host_class != "sync":  # a kernel whose output size the host must read
                host[op.host_class] += 1
            close("sync")
            continue
        host[op.host_class] += 1
    close("end")
    return Program(tuple(segments), dict(trace.meta))


def _same(a: Segment, b: Segment) -> bool:
    return (a.host, a.kernels, a.end, a.collective) == (b.host, b.kernels, b.end, b.collective)


# ------------------------------------------------------------------ JSON

def program_to_dict(program: Program) -> dict[str, Any]:
    segs = []
    for seg in program.segments:
        out: dict[str, Any] = {"host": dict(seg.host), "end": seg.end}
        if seg.kernels:
            out["kernels"] = [[k.kind, int(k.tensor_core), _num(k.bytes), _num(k.flops),
                               _num(k.count)] for k in seg.kernels]
        if seg.collective is not None:
            c = seg.collective
            out["collective"] = {"name": c.name, "group_size": c.group_size, "bytes": c.bytes}
        if seg.times != 1:
            out["times"] = seg.times
        segs.append(out)
    return {"segments": segs}


def _num(x: float) -> float | int:
    return int(x) if float(x).is_integer() else x


def program_from_dict(data: Any, fail: Any) -> Program:
    """``fail(field, why)`` makes the error naming the file and field."""
    if not isinstance(data, dict) or not isinstance(data.get("segments"), list):
        raise fail("segments", "expected a list of segments")
    segs = []
    for i, raw in enumerate(data["segments"]):
        where = f"segments[{i}]"
        if not isinstance(raw, dict):
            raise fail(where, "expected an object")
        host = raw.get("host", {})
        if not isinstance(host, dict) or any(c not in HOST_CLASSES or not _nonneg(n)
                                             for c, n in host.items()):
            raise fail(f"{where}.host", f"expected counts of {', '.join(HOST_CLASSES)}")
        end = raw.get("end")
        if end not in ("collective", "sync", "end"):
            raise fail(f"{where}.end", "expected collective, sync or end")
        groups = []
        for j, k in enumerate(raw.get("kernels", ())):
            if type(k) is not list or len(k) != len(KERNEL_FIELDS) or type(k[0]) is not str:
                raise fail(f"{where}.kernels[{j}]", KERNEL_SHAPE)
            kind, tc, nbytes, flops, count = k  # checked inline: thousands per file
            if not (type(tc) in _NUMBER and type(nbytes) in _NUMBER and type(flops) in _NUMBER
                    and type(count) in _NUMBER and tc >= 0 and nbytes >= 0 and flops >= 0
                    and count >= 0):
                raise fail(f"{where}.kernels[{j}]", KERNEL_SHAPE)
            groups.append(KernelGroup(kind, bool(tc), float(nbytes), float(flops),
                                      float(count)))
        coll = None
        if end == "collective":
            c = raw.get("collective")
            if (not isinstance(c, dict) or not isinstance(c.get("name"), str)
                    or not _posint(c.get("group_size")) or not _nonneg(c.get("bytes"))):
                raise fail(f"{where}.collective", "expected {name, group_size, bytes}")
            coll = Collective(c["name"], int(c["group_size"]), int(c["bytes"]))
        times = raw.get("times", 1)
        if not _posint(times):
            raise fail(f"{where}.times", "expected a positive integer")
        segs.append(Segment(tuple((c, float(host[c])) for c in HOST_CLASSES if c in host),
                            tuple(groups), end, coll, int(times)))
    return Program(tuple(segs))


KERNEL_SHAPE = "expected [kind, tensor_core 0/1, bytes, flops, count]"
_NUMBER = (int, float)  # exactly: a bool is not a count


def _nonneg(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x >= 0


def _posint(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 1
