"""Chrome trace and Gantt chart of simulation results."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import replace

import pytest

from pkbsim.report.gantt import gantt_chart, shown_ranks, title
from pkbsim.report.trace import chrome_trace, lanes
from pkbsim.sim.result import FlowRecord, SimResult, flow_links
from pkbsim.sim.run import run_simulation

EPS = 1e-6
CASES = {
    "reference": ("grpo", "nccl_reference", {}),
    "custom": ("grpo", "custom_best", {}),
    "overlapping": ("moe_dispatch", "custom_best", {}),  # GPU work of a fused kernel overlaps
    "multicast": ("3", "custom_best", {}),  # NVSwitch multicast flows
    "multinode": ("1", "nccl_reference", {"topology": "h100-ib-2node", "world_size": 16}),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def result(request: pytest.FixtureRequest) -> SimResult:
    task, strategy, kwargs = CASES[request.param]
    return run_simulation(task, strategy, trace=True, **kwargs)


@pytest.fixture(scope="module")
def untraced() -> SimResult:
    return run_simulation("grpo", "nccl_reference")


def _events(result: SimResult) -> list[dict]:
    doc = json.loads(chrome_trace(result))
    assert doc["displayTimeUnit"] in ("ns", "us")
    return doc["traceEvents"]


def test_trace_header(result: SimResult) -> None:
    other = json.loads(chrome_trace(result))["otherData"]
    inst = result.instance
    assert other["task_id"] == inst.spec.id and other["task_name"] == inst.spec.name
    assert other["topology"] == result.topology.name
    assert other["world_size"] == inst.world_size and other["preset"] == inst.preset
    assert other["strategy"] == result.strategy.name
    assert other["predicted_us"] == result.predicted_us
    assert other["pkbsim_version"]


def test_processes_and_threads(result: SimResult) -> None:
    events = _events(result)
    w = result.instance.world_size
    names = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert names == {**{r: f"GPU {r}" for r in range(w)}, w: "links"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
               if e["name"] == "thread_name"}
    order = {(e["pid"], e["tid"]): e["args"]["sort_index"] for e in events
             if e["name"] == "thread_sort_index"}
    for r in range(w):
        assert threads[(r, 0)] == "host" and threads[(r, 1)] == "stream0"
        assert order[(r, 0)] < order[(r, 1)]
    used = {(e["pid"], e["tid"]) for e in events if e["ph"] == "X"}
    assert used <= set(threads)


def test_events_nest_on_every_thread(result: SimResult) -> None:
    per_thread: dict[tuple[int, int], list[tuple[float, float]]] = defaultdict(list)
    for e in _events(result):
        if e["ph"] == "X":
            assert e["dur"] >= 0
            per_thread[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
    assert per_thread
    for spans in per_thread.values():
        stack: list[float] = []
        for start, end in sorted(spans, key=lambda s: (s[0], -s[1])):
            while stack and stack[-1] <= start + EPS:
                stack.pop()
            assert not stack or end <= stack[-1] + EPS, "partial overlap"
            stack.append(end)


def test_every_timed_node_is_in_the_trace(result: SimResult) -> None:
    events = _events(result)
    xs = [e for e in events if e["ph"] == "X" and e["cat"] in ("host", "gpu")]
    assert len(xs) == sum(1 for n in result.nodes if n.end_us > n.start_us)
    launches = [e for e in events if e["ph"] == "X" and e["cat"] == "launch"]
    assert len(launches) == sum(1 for n in result.nodes if n.start_us > n.ready_us)
    ends = [e for e in events if e["ph"] == "i"]
    assert len(ends) == result.iterations * result.instance.world_size
    assert all(e["name"] == "iteration_end" for e in ends)


def test_flow_bytes_add_up(result: SimResult) -> None:
    events = _events(result)
    flows = [e for e in events if e["ph"] == "X" and e["cat"] == "flow"]
    once = {e["args"]["flow"]: e["args"]["bytes"] for e in flows}
    assert sum(once.values()) == pytest.approx(sum(f.nbytes for f in result.flows))
    links = flow_links(result)
    assert len(flows) == sum(len(ids) for ids in links)
    per_link: dict[str, float] = defaultdict(float)
    for f, ids in zip(result.flows, links, strict=True):
        for link in ids:
            per_link[link] += f.nbytes
    traced: dict[str, float] = defaultdict(float)
    for e in flows:
        traced[e["args"]["link"]] += e["args"]["bytes"]
    assert traced == pytest.approx(per_link)


def test_link_counters_return_to_zero(result: SimResult) -> None:
    counters: dict[str, list[int]] = defaultdict(list)
    for e in _events(result):
        if e["ph"] == "C":
            counters[e["name"]].append(e["args"]["flows"])
    assert set(counters) == {link for ids in flow_links(result) for link in ids}
    for values in counters.values():
        assert values[-1] == 0 and max(values) >= 1 and min(values) >= 0


def test_critical_path_is_flagged(result: SimResult) -> None:
    events = [e for e in _events(result) if e["ph"] == "X" and e["cat"] != "flow"]
    flagged = [e for e in events if e["args"]["critical"]]
    assert flagged and len(flagged) < len(events)
    for seg in result.critical_path:
        assert any(e["pid"] == seg.rank and seg.name in (e["name"], e["args"].get("op"))
                   and e["ts"] < seg.end_us + EPS and e["ts"] + e["dur"] > seg.start_us - EPS
                   for e in flagged), seg


def test_trace_is_deterministic(result: SimResult) -> None:
    assert chrome_trace(result) == chrome_trace(result)


def test_trace_without_flows(untraced: SimResult) -> None:
    assert not untraced.flows
    events = _events(untraced)
    pids = {e["pid"] for e in events}
    assert pids == set(range(untraced.instance.world_size))
    assert not any(e["ph"] == "C" for e in events)


def test_flow_links_multicast_and_compute(untraced: SimResult) -> None:
    fake = replace(untraced, flows=(
        FlowRecord(1.0, 2.0, "mc", (0, 1), (2, 3), 10.0),
        FlowRecord(1.5, 3.0, "k", (4,), (), 5.0),
        FlowRecord(1.5, 2.5, "p2p", (0,), (2,), 7.0)))
    assert flow_links(fake) == [
        ("gpu0.nvlink.out", "gpu1.nvlink.out", "gpu2.nvlink.in", "gpu3.nvlink.in"),
        ("gpu4.hbm",), ("gpu0.nvlink.out", "gpu2.nvlink.in")]
    lane_names = {e["args"]["name"] for e in _events(fake) if e["name"] == "thread_name"
                  and e["pid"] == fake.instance.world_size}
    assert {"gpu0.nvlink.out #2", "gpu2.nvlink.in #2", "gpu4.hbm #1"} <= lane_names
    assert isinstance(gantt_chart(fake), bytes)


def test_lanes() -> None:
    assert lanes([(0, 2), (1, 3), (2, 4), (3, 5), (1, 1)]) == [0, 1, 0, 1, 1]
    assert lanes([]) == []


def test_gantt_png_is_deterministic(result: SimResult) -> None:
    png = gantt_chart(result)
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert png == gantt_chart(result, "png")


@pytest.mark.slow
@pytest.mark.parametrize("fmt, magic", [("svg", b"<?xml"), ("pdf", b"%PDF")])
def test_gantt_vector_formats(untraced: SimResult, fmt: str, magic: bytes) -> None:
    data = gantt_chart(untraced, fmt)
    assert data.startswith(magic)
    assert data == gantt_chart(untraced, fmt)


def test_gantt_without_flows(untraced: SimResult) -> None:
    assert gantt_chart(untraced).startswith(b"\x89PNG")


def test_gantt_leaves_pyplot_alone(untraced: SimResult) -> None:
    import matplotlib.pyplot as plt

    before = plt.get_fignums()
    gantt_chart(untraced)
    assert plt.get_fignums() == before


def test_gantt_rows_and_title() -> None:
    wide = run_simulation("1", "nccl_reference", topology="h100-ib-2node", world_size=16)
    assert shown_ranks(wide) == sorted({0, 1, wide.slowest_rank, 15})
    text = title(wide)
    assert text.startswith("Task 1 allreduce on h100-ib-2node, W=16, nccl_reference: predicted")
    assert f"{16 - len(shown_ranks(wide))} of 16 ranks not shown" in text


def test_gantt_rejects_unknown_format(untraced: SimResult) -> None:
    with pytest.raises(Exception, match="format"):
        gantt_chart(untraced, "jpg")
