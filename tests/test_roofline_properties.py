"""Properties every bound must have, over random collectives and sizes."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pkbsim.roofline import roofline
from pkbsim.task.schema import COMM_KINDS, CommOp, TaskInstance, TaskSpec
from pkbsim.topology import load_topology

H100 = load_topology("dgx-h100")
SPEC = TaskSpec(id=1, name="prop", aliases=(), title="", source="", parallelism="",
                description="", default_world_size=8, constraints=(), params=(), derived=(),
                presets={}, groups={})


def instance(kind: str, nbytes: float, w: int) -> TaskInstance:
    op = CommOp(id="op", kind=kind, bytes_per_rank=nbytes, dtype="bf16", group="world",
                group_size=w, group_layout="contiguous", root=0,
                reduce_op="sum" if kind in ("all_reduce", "reduce_scatter", "reduce") else None,
                pattern="ring" if kind == "send_recv" else None, data_dependent=False,
                imbalance=1.0, repeat=1, chain=False, after=(), host_syncs=0, api="", note="")
    return TaskInstance(SPEC, w, "pkb", {"W": w}, {}, (op,))


cases = st.tuples(st.sampled_from(COMM_KINDS), st.integers(1, 1 << 32),
                  st.sampled_from([2, 4, 8]))


@settings(max_examples=150, deadline=None)
@given(cases)
def test_ordering_of_the_comm_terms(case: tuple[str, int, int]) -> None:
    kind, nbytes, w = case
    r = roofline(instance(kind, nbytes, w), H100)
    assert 0 < r.t_comm_line_rate_s <= r.t_comm_s <= r.t_comm_no_switch_reduction_s
    assert r.t_comm_line_rate_s <= r.t_comm_line_rate_no_switch_reduction_s
    assert r.t_roof_s >= max(r.t_comm_s, r.t_latency_floor_s)


@settings(max_examples=100, deadline=None)
@given(cases)
def test_bytes_scale_linearly_and_bandwidth_inversely(case: tuple[str, int, int]) -> None:
    kind, nbytes, w = case
    base = roofline(instance(kind, nbytes, w), H100)
    double = roofline(instance(kind, 2 * nbytes, w), H100)
    assert double.t_comm_s == pytest.approx(2 * base.t_comm_s)
    faster = dataclasses.replace(H100, scale_up=dataclasses.replace(
        H100.scale_up, link_bandwidth_GBps=2 * H100.scale_up.link_bandwidth_GBps))
    assert roofline(instance(kind, nbytes, w), faster).t_comm_s == pytest.approx(
        base.t_comm_s / 2)
    assert double.t_latency_floor_s == base.t_latency_floor_s
