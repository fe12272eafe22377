"""A simulation as a Chrome / Perfetto trace (Trace Event Format, JSON).

One process per GPU rank (threads: host, stream0, plus extra lanes where GPU work overlaps) and,
when flows were recorded, one process "links" with a thread per lane of every link a flow
crosses. Timestamps are microseconds from simulation start. The same result gives the same text.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from pkbsim import __version__
from pkbsim.files import json_text
from pkbsim.sim.result import NodeRecord, SimResult, flow_links

TRACKS = ("host", "stream0")  # first lane of each: tid 0 and 1; extra lanes follow
Event = dict[str, Any]


def lanes(spans: Sequence[tuple[float, float]]) -> list[int]:
    """Lane of each (start, end): the first whose previous span ended at or before its start."""
    ends: list[float] = []
    out = [0] * len(spans)
    for i in sorted(range(len(spans)), key=lambda i: (spans[i][0], spans[i][1], i)):
        start, end = spans[i]
        lane = next((k for k, e in enumerate(ends) if e <= start), len(ends))
        if lane == len(ends):
            ends.append(end)
        ends[lane] = end
        out[i] = lane
    return out


def natural_key(text: str) -> tuple[str | int, ...]:
    """gpu2 before gpu10."""
    return tuple(int(p) if i % 2 else p for i, p in enumerate(re.split(r"(\d+)", text)))


def critical_nodes(result: SimResult) -> list[bool]:
    """Whether each node matches a critical-path segment: same rank, track and name, and
    overlapping time (the node from ready to end)."""
    segs: dict[tuple[int, str, str], list[tuple[float, float]]] = defaultdict(list)
    for s in result.critical_path:
        segs[(s.rank, s.track, s.name)].append((s.start_us, s.end_us))
    return [any(max(n.ready_us, a) < min(n.end_us, b) or (n.ready_us, n.end_us) == (a, b)
                for a, b in segs.get((n.rank, n.track, n.name), ()))
            for n in result.nodes]


def node_lanes(nodes: Sequence[NodeRecord]) -> dict[int, int]:
    """Lane (within its rank and track) of each node that spans time, by index in ``nodes``."""
    groups: dict[tuple[int, str], list[int]] = defaultdict(list)
    for i, n in enumerate(nodes):
        if n.end_us > n.ready_us:
            groups[(n.rank, n.track)].append(i)
    out: dict[int, int] = {}
    for idx in groups.values():
        for i, lane in zip(idx, lanes([(nodes[i].ready_us, nodes[i].end_us) for i in idx]),
                           strict=True):
            out[i] = lane
    return out


def _track_order(tracks: set[str]) -> list[str]:
    return [t for t in TRACKS if t in tracks] + sorted(tracks - set(TRACKS))


def _meta(name: str, pid: int, tid: int | None, args: dict[str, Any]) -> Event:
    ev: Event = {"ph": "M", "name": name, "pid": pid, "args": args}
    if tid is not None:
        ev["tid"] = tid
    return ev


def _rank_events(result: SimResult) -> list[Event]:
    nodes, crit, lane_of = result.nodes, critical_nodes(result), node_lanes(result.nodes)
    meta: list[Event] = []
    body: list[Event] = []
    for rank in range(result.instance.world_size):
        idx = [i for i, n in enumerate(nodes) if n.rank == rank]
        count = {t: 1 for t in TRACKS}
        for i in idx:
            t = nodes[i].track
            count[t] = max(count.get(t, 1), lane_of.get(i, 0) + 1)
        order = [(t, k) for t in _track_order(set(count)) for k in range(count[t])]
        first = {(t, 0): j for j, t in enumerate(TRACKS)}
        extra = [key for key in order if key not in first]
        tid = {**first, **{key: len(TRACKS) + j for j, key in enumerate(extra)}}
        meta += [_meta("process_name", rank, None, {"name": f"GPU {rank}"}),
                 _meta("process_sort_index", rank, None, {"sort_index": rank})]
        for j, (t, k) in enumerate(order):
            name = t if k == 0 else f"{t} #{k + 1}"
            meta += [_meta("thread_name", rank, tid[(t, k)], {"name": name}),
                     _meta("thread_sort_index", rank, tid[(t, k)], {"sort_index": j})]
        for i in idx:
            n = nodes[i]
            where = {"pid": rank, "tid": tid[(n.track, lane_of.get(i, 0))]}
            if n.start_us > n.ready_us:
                body.append({"ph": "X", "name": "launch", "cat": "launch", **where,
                             "ts": n.ready_us, "dur": round(n.start_us - n.ready_us, 6),
                             "args": {"op": n.name, "iteration": n.iteration,
                                      "critical": crit[i]}})
            if n.end_us > n.start_us:
                body.append({"ph": "X", "name": n.name,
                             "cat": "host" if n.track == "host" else "gpu", **where,
                             "ts": n.start_us, "dur": round(n.end_us - n.start_us, 6),
                             "args": {"iteration": n.iteration, "ready_us": n.ready_us,
                                      "critical": crit[i]}})
            elif n.name == "iteration_end":
                body.append({"ph": "i", "s": "t", "name": n.name, "cat": "gpu", **where,
                             "ts": n.start_us, "args": {"iteration": n.iteration}})
    return meta + body


def _counter(link: str, pid: int, spans: Sequence[tuple[float, float]]) -> list[Event]:
    """Active flows on ``link`` after every change."""
    delta: dict[float, int] = defaultdict(int)
    for start, end in spans:
        delta[start] += 1
        delta[end] -= 1
    out: list[Event] = []
    active = 0
    for t in sorted(delta):
        if delta[t]:
            active += delta[t]
            out.append({"ph": "C", "name": link, "pid": pid, "tid": 0, "ts": t,
                        "args": {"flows": active}})
    return out


def _link_events(result: SimResult) -> list[Event]:
    pid = result.instance.world_size
    by_link: dict[str, list[int]] = defaultdict(list)
    for i, ids in enumerate(flow_links(result)):
        for link in ids:
            by_link[link].append(i)
    meta = [_meta("process_name", pid, None, {"name": "links"}),
            _meta("process_sort_index", pid, None, {"sort_index": pid})]
    body: list[Event] = []
    tid = 0
    for link in sorted(by_link, key=natural_key):
        idx = by_link[link]
        spans = [(result.flows[i].start_us, result.flows[i].end_us) for i in idx]
        lane = lanes(spans)
        for k in range(max(lane) + 1):
            meta += [_meta("thread_name", pid, tid + k, {"name": f"{link} #{k + 1}"}),
                     _meta("thread_sort_index", pid, tid + k, {"sort_index": tid + k})]
        for i, k in sorted(zip(idx, lane, strict=True), key=lambda p: (p[1], p[0])):
            f = result.flows[i]
            body.append({"ph": "X", "name": f.label, "cat": "flow", "pid": pid, "tid": tid + k,
                         "ts": f.start_us, "dur": round(f.end_us - f.start_us, 6),
                         "args": {"bytes": f.nbytes, "srcs": list(f.srcs),
                                  "dsts": list(f.dsts), "flow": i, "link": link}})
        body += _counter(link, pid, spans)
        tid += max(lane) + 1
    return meta + body


def chrome_trace(result: SimResult) -> str:
    """The trace as one JSON document (open it in ui.perfetto.dev or chrome://tracing)."""
    inst = result.instance
    events = _rank_events(result)
    if result.flows:
        events += _link_events(result)
    doc = {
        "displayTimeUnit": "ns",
        "otherData": {
            "task_id": inst.spec.problem_id, "task_name": inst.spec.name,
            "topology": result.topology.name, "world_size": inst.world_size,
            "preset": inst.preset, "strategy": result.strategy.name,
            "predicted_us": result.predicted_us, "slowest_rank": result.slowest_rank,
            "iterations": result.iterations, "pkbsim_version": __version__,
        },
        "traceEvents": events,
    }
    return json_text(doc, sort_keys=True, separators=(",", ":")) + "\n"
