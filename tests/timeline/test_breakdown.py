"""The split of a call's window into terms: exact on small traces, a partition always."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kineto_traces import TraceBuilder

from pkbsim.timeline.breakdown import decompose, split_window
from pkbsim.timeline.events import GpuOp, HostSpan
from pkbsim.timeline.kineto import load_kineto, with_rank_waits


def two_calls(b: TraceBuilder) -> None:
    """Per call (40 us apart): mm's GEMM 8-18, add's kernel 22-25, an .item() sync from 25."""
    for k, t0 in enumerate((0, 40)):
        b.host(f"ProfilerStep#{k + 1}", t0, 30, cat="user_annotation")
        b.host("aten::mm", t0 + 2, 6)
        b.launch(t0 + 5, 2, t0 + 8, 10, "sm90_xmma_gemm_bf16bf16_bf16f32")
        b.host("aten::add", t0 + 18, 5)
        b.launch(t0 + 20, 2, t0 + 22, 3, "vectorized_elementwise_kernel")
        b.host("aten::item", t0 + 24, 5)
        b.runtime("cudaStreamSynchronize", t0 + 25, 3)
        b.host("c10d::allreduce_", t0 + 29, 1)


def test_a_small_trace_splits_exactly(tmp_path: Path) -> None:
    b = TraceBuilder()
    two_calls(b)
    tl = load_kineto(b.write(tmp_path / "t.json"))
    assert tl.how_calls == "ProfilerStep annotations"
    # back to back (no sync between the calls): call 1 runs until call 2 starts on the host
    assert [(c.start_us, c.end_us) for c in tl.calls] == [(0, 40), (40, 70)]
    assert [o.kind for o in tl.gpu] == ["gemm", "elementwise"] * 2
    first, second = decompose(tl).calls
    # idle 0-8 and 18-22 while the host issues, 25-28 in the sync, 28-40 after it (the rest of
    # the call and the loop until the next call)
    assert first.terms == {"host_launch": 24.0, "sync": 3.0, "kernel:elementwise": 3.0,
                           "kernel:gemm": 10.0}
    assert first.host_ops == {"python": 12.0, "aten::mm": 6.0, "aten::add": 4.0,
                              "aten::item": 1.0, "c10d::allreduce_": 1.0}
    assert second.terms == {"host_launch": 14.0, "sync": 3.0, "kernel:elementwise": 3.0,
                            "kernel:gemm": 10.0}
    assert decompose(tl).mean.total_us == 35.0  # fewer than 3 calls: every call counts


def test_the_first_of_three_calls_is_the_profilers_warm_up(tmp_path: Path) -> None:
    b = TraceBuilder()
    for k, t0 in enumerate((0, 100, 130)):
        b.host(f"ProfilerStep#{k + 1}", t0, 90 if k == 0 else 20, cat="user_annotation")
        b.host("aten::mul", t0 + 1, 5)
        b.launch(t0 + 2, 2, t0 + 5, 10, "vectorized_elementwise_kernel")
    d = decompose(load_kineto(b.write(tmp_path / "t.json")))
    assert [c.total_us for c in d.calls] == [100.0, 30.0, 20.0]
    assert d.mean.total_us == 25.0 and d.call_us == (30.0, 20.0)


def test_back_to_back_calls_tile_the_gpu(tmp_path: Path) -> None:
    """GPU-bound: the host issues call 2 while call 1's kernel runs; call 2's window starts
    where call 1's work ends (a CUDA event recorded after call 1 completes there)."""
    b = TraceBuilder()
    b.host("ProfilerStep#1", 0, 5, cat="user_annotation")
    b.host("aten::mm", 1, 3)
    b.launch(2, 1, 4, 50, "nvjet_tst_gemm")
    b.host("ProfilerStep#2", 6, 5, cat="user_annotation")
    b.host("aten::mm", 7, 3)
    b.launch(8, 1, 54, 50, "nvjet_tst_gemm")
    tl = load_kineto(b.write(tmp_path / "t.json"))
    assert [(c.start_us, c.end_us) for c in tl.calls] == [(0, 54), (54, 104)]
    d = decompose(tl)
    assert d.calls[0].terms == {"host_launch": 4.0, "kernel:gemm": 50.0}
    assert d.calls[1].terms == {"kernel:gemm": 50.0}


def test_pkb_profile_traces_split_on_solution_calls(tmp_path: Path) -> None:
    """PKB's --profile: no step annotations, with_stack's solution() frames, a sync after
    each call (outside the call)."""
    b = TraceBuilder()
    for t0 in (0, 100):
        b.host("kernelgen/1_allreduce_cuda.py(12): solution", t0, 20, cat="python_function")
        b.host("aten::add", t0 + 2, 4)
        b.launch(t0 + 3, 2, t0 + 6, 30, "vectorized_elementwise_kernel")
        b.host("c10d::allreduce_", t0 + 8, 10)
        b.launch(t0 + 10, 3, t0 + 36, 12, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL")
        b.runtime("cudaDeviceSynchronize", t0 + 21, 30)
    tl = load_kineto(b.write(tmp_path / "t.json"))
    assert tl.how_calls == "calls of solution() (with_stack)"
    assert [(c.start_us, c.end_us) for c in tl.calls] == [(0, 48), (100, 148)]
    d = decompose(tl).calls[0]
    assert d.terms == {"host_launch": 6.0, "communication": 12.0, "kernel:elementwise": 30.0}
    assert math.isclose(sum(d.terms.values()), 48.0)


def test_communication_under_a_kernel_is_hidden() -> None:
    gpu = [GpuOp(0, 10, "gemm", "gemm", False, 0), GpuOp(5, 20, "nccl", "communication",
                                                          True, 0)]
    d = split_window(0, 20, gpu, [], [])
    assert d.terms == {"communication": 10.0, "kernel:gemm": 10.0}
    assert (d.comm_us, d.overlapped_comm_us) == (15.0, 5.0)


def test_kinds_running_together_share_the_instant() -> None:
    gpu = [GpuOp(0, 10, "a", "gemm", False, 0), GpuOp(0, 10, "b", "reduction", False, 0)]
    assert split_window(0, 10, gpu, [], []).terms == {"kernel:gemm": 5.0,
                                                      "kernel:reduction": 5.0}


def test_a_collective_waits_for_the_last_rank(tmp_path: Path) -> None:
    """Rank 1 reaches the all-reduce 5 us after rank 0: rank 0's first 5 us are waits."""
    timelines = []
    for rank, start in ((0, 10), (1, 15)):
        b = TraceBuilder(rank, 2)
        b.host("ProfilerStep#1", 0, 8, cat="user_annotation")
        b.host("c10d::allreduce_", 1, 5)
        b.launch(2, 2, start, 25 - start + 5, "ncclDevKernel_AllReduce_Sum_f32_RING_LL")
        timelines.append(load_kineto(b.write(tmp_path / f"rank_{rank}_trace.json")))
    waited = with_rank_waits(timelines)
    assert [o.wait_us for t in waited for o in t.gpu] == [5.0, 0.0]
    d0 = decompose(waited[0]).calls[0]
    assert d0.terms == {"host_launch": 10.0, "communication": 15.0, "wait_ranks": 5.0}
    assert decompose(waited[1]).calls[0].terms == {"host_launch": 15.0, "communication": 15.0}


def test_a_trace_without_markers_is_one_call(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.host("aten::mul", 0, 4)
    b.launch(1, 2, 5, 5, "vectorized_elementwise_kernel")
    tl = load_kineto(b.write(tmp_path / "t.json"))
    assert tl.how_calls == "the whole trace (no call markers)"
    assert decompose(tl).mean.terms == {"host_launch": 5.0, "kernel:elementwise": 5.0}


def test_a_call_marker_names_the_call(tmp_path: Path) -> None:
    b = TraceBuilder()
    for t0 in (0, 50):
        b.host("my_step", t0, 10, cat="user_annotation")
        b.host("aten::mm", t0 + 1, 3)
        b.launch(t0 + 2, 1, t0 + 4, 8, "cutlass_80_tensorop_gemm")
    tl = load_kineto(b.write(tmp_path / "t.json"), call_marker="my_step")
    assert len(tl.calls) == 2 and tl.how_calls == "ranges named 'my_step'"


ops = st.lists(st.tuples(st.floats(0, 100), st.floats(0, 50), st.booleans(),
                         st.sampled_from(["gemm", "elementwise", "copy"]), st.floats(0, 1)),
               max_size=12)
spans = st.lists(st.tuples(st.floats(0, 100), st.floats(0, 30)), max_size=6)


@settings(max_examples=300, deadline=None)
@given(ops, spans, spans, st.floats(0, 50), st.floats(1, 120))
def test_the_terms_partition_any_window(raw_ops, raw_host, raw_sync, start, length) -> None:
    gpu = sorted((GpuOp(s, s + d, "k", "communication" if c else k, c, 0, wait_us=w * d)
                  for s, d, c, k, w in raw_ops), key=lambda o: o.start_us)
    host = sorted((HostSpan(s, s + d, "aten::x") for s, d in raw_host),
                  key=lambda h: h.start_us)
    syncs = sorted((HostSpan(s, s + d, "cudaStreamSynchronize") for s, d in raw_sync),
                   key=lambda h: h.start_us)
    d = split_window(start, start + length, gpu, host, syncs)
    assert all(v >= 0 for v in d.terms.values())
    assert math.isclose(sum(d.terms.values()), length, rel_tol=1e-9, abs_tol=1e-9)
    assert sum(d.host_ops.values()) == pytest.approx(d.terms.get("host_launch", 0.0),
                                                     abs=1e-9)
    assert d.overlapped_comm_us <= d.comm_us + 1e-9
