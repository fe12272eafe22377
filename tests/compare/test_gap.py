"""Gap decomposition on synthetic measurements whose causes are known: each named term against
its closed form, the exact-sum invariant, capping, ranking and bad inspections."""

from __future__ import annotations

import math
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pkbsim.comparator.gap import TERMS, Gap, decompose, reference_inspection
from pkbsim.comparator.reference import ReferenceModel, reference_model
from pkbsim.errors import PkbsimError
from pkbsim.inspection.vocab import FLAGS, MECHANISMS
from pkbsim.sim import Strategy, simulate_nccl_call
from pkbsim.task.loader import instantiate, load_task
from pkbsim.task.schema import CommOp, TaskInstance
from pkbsim.topology.loader import load_topology
from pkbsim.topology.schema import Topology

US = 1e-6
MIB2 = 2 * 2**20  # problem 1's buffer at PKB's size: 1024 x 1024 bf16


@cache
def topo(name: str = "dgx-h100") -> Topology:
    return load_topology(name)


@cache
def inst(task: str, world_size: int | None = None) -> TaskInstance:
    return instantiate(load_task(task), world_size)


def inspection(**given: Any) -> dict[str, Any]:
    """Nothing found, then ``given``."""
    out: dict[str, Any] = {"mechanisms": [], "nccl_on_hot_path": []}
    out.update({f: False for f in FLAGS})
    out.update(given)
    return out


def named(gap: Gap) -> dict[str, float]:
    return {t.name: t.time_us for t in gap.terms if t.name != "residual"}


def check_sum(gap: Gap) -> None:
    assert math.fsum(t.time_us for t in gap.terms) == pytest.approx(gap.gap_us, rel=1e-12,
                                                                    abs=1e-9)


# ---------------------------------------------------------------- known causes

def test_host_sync_recovers_a_known_cost() -> None:
    t = topo()
    i = inst("2")  # all-gather only: no compute, so only the host syncs can show
    h_s = t.latency.host_sync_us
    roof = decompose(i, t, 1.0, None, simulate_fixes=False).t_roof_us
    gap = decompose(i, t, (roof + 3 * h_s + 0.05) * US,
                    inspection(host_sync=True, host_syncs=3, custom_kernels=0))
    assert gap.terms[0].name == "host_sync"
    assert gap.term("host_sync").time_us == pytest.approx(3 * h_s, rel=1e-12)
    assert gap.term("residual").time_us == pytest.approx(0.05, abs=1e-9)
    assert all(v == 0 for k, v in named(gap).items() if k != "host_sync")
    assert ".item()" in (gap.term("host_sync").fix or "")
    check_sum(gap)


def test_host_sync_fix_simulates_the_reference_without_syncs() -> None:
    i = inst("21")  # clip_grad_norm: its traced program synchronises with the host
    ref = reference_model(i)
    assert ref.program is not None
    syncs = sum(s.times for s in ref.program.program.segments if s.end == "sync")
    assert syncs > 0
    gap = decompose(i, topo(), 4000 * US, reference_inspection(i, ref), reference=ref)
    term = gap.term("host_sync")
    assert term.time_us == pytest.approx(syncs * topo().latency.host_sync_us)
    assert gap.predicted_candidate_us == gap.predicted_nccl_reference_us
    assert term.predicted_after_fix_us is not None and gap.predicted_candidate_us is not None
    assert term.predicted_after_fix_us < gap.predicted_candidate_us - term.time_us
    # the fix ran the same traced program, its sync boundaries removed
    plain = ref.without_host_syncs()
    assert plain.program is not None and plain.program.point == ref.program.point
    assert not any(s.end == "sync" for s in plain.program.program.segments)
    assert term.predicted_after_fix_us == plain.simulate(topo()).predicted_us


@pytest.mark.parametrize("w", [2, 4, 8])
def test_one_shot_excess_bytes_closed_form(w: int) -> None:
    t = topo()
    eta, line_Bps = t.mechanisms["sm_ldst"].efficiency, t.scale_up.bandwidth_GBps * 1e9
    expected_us = (w - 1) * (w - 2) / w * MIB2 / (eta * line_Bps) / US
    gap = decompose(inst("1", w), t, 500 * US,
                    inspection(mechanisms=["sm_peer_ldst"], one_shot=True,
                               fused_comm_compute=True, custom_kernels=1))
    term = gap.term("excess_bytes")
    assert term.model_us == pytest.approx(expected_us, rel=1e-9)
    assert term.time_us == term.model_us and gap.scale == 1.0
    assert gap.ops[0].algorithm == "one_shot" and gap.ops[0].mechanism == "sm_ldst"
    if w == 2:  # one-shot is optimal on two ranks
        assert term.fix is None and term.predicted_after_fix_us is None
    else:
        assert term.predicted_after_fix_us is not None and gap.predicted_candidate_us
        assert term.predicted_after_fix_us < gap.predicted_candidate_us
    check_sum(gap)


def test_nccl_mechanism_closed_form() -> None:
    """PKB's 2 MiB all-reduce on 8 H100s: NCCL's tuner picks NVLS, with its 25 us NVLS latency
    and one hop; the best at this size is NVLS on multimem in a custom kernel (its own launch
    and two flag steps), moving the same bytes."""
    t = topo()
    line = t.scale_up.bandwidth_GBps * 1e9
    mm = t.mechanisms["nvls_multimem"]
    moved = 9 / 8 * MIB2 / (mm.efficiency * line) / US
    nccl_nvls = 25.0 + mm.step_latency_us + moved
    nvls = mm.latency_us + 2 * mm.step_latency_us + moved
    i = inst("1")
    gap = decompose(i, t, 500 * US, reference_inspection(i))
    assert gap.term("mechanism_inefficiency").model_us == pytest.approx(nccl_nvls - nvls,
                                                                        abs=0.01)
    assert gap.ops[0].carried_by == "nccl_payload" and gap.ops[0].best == "nvls_multimem/nvls"
    assert "custom kernel instead of NCCL" in (gap.term("mechanism_inefficiency").fix or "")


def test_copy_engine_latency_at_small_size() -> None:
    """GRPO's two tiny collectives: the copy engine's 2.8 us per copy against TMA's 0.83 us
    launch plus one 0.83 us step; the bytes add nanoseconds."""
    t = topo()
    ce, tma = t.mechanisms["copy_engine"], t.mechanisms["tma"]
    per_op = ce.latency_us - (tma.latency_us + tma.step_latency_us)
    gap = decompose(inst("grpo"), t, 100 * US,
                    inspection(mechanisms=["copy_engine"], fused_comm_compute=True))
    assert gap.term("mechanism_inefficiency").model_us == pytest.approx(2 * per_op, abs=0.01)
    assert [o.carried_by for o in gap.ops] == ["copy_engine", "copy_engine"]


def test_missing_overlap_closed_form() -> None:
    """GEMM + all-reduce: serialized, the GEMM's and clone's 8 MiB of HBM traffic add to
    t_comm; with an overlap attempt they do not."""
    t = topo()
    i = inst("13")
    t_mem_us = 8 * 2**20 / t.gpu.hbm_Bps / US
    gap = decompose(i, t, 500 * US, reference_inspection(i), simulate_fixes=False)
    assert gap.term("missing_overlap").model_us == pytest.approx(t_mem_us, rel=1e-9)
    overlapped = reference_inspection(i) | {"overlap_attempt": True}
    assert decompose(i, t, 500 * US, overlapped,
                     simulate_fixes=False).term("missing_overlap").time_us == 0
    grpo = inst("grpo")  # latency-bound: the serialized sum stays under the floor
    assert decompose(grpo, t, 500 * US, reference_inspection(grpo),
                     simulate_fixes=False).term("missing_overlap").time_us == 0


def test_one_launch_shows_as_host_dispatch() -> None:
    """One fused TMA kernel for GRPO: the GPU's work is the latency floor, the host's one
    eager launch (9.5 us) sets the time; the visible part is H_l - t_roof."""
    t = topo()
    gap = decompose(inst("grpo"), t, t.latency.host_launch_us * US,
                    inspection(mechanisms=["tma"], fused_comm_compute=True))
    expected = t.latency.host_launch_us - gap.t_roof_us
    assert gap.term("launch_sync_latency").time_us == pytest.approx(expected, rel=1e-12)
    assert gap.term("residual").time_us == pytest.approx(0, abs=1e-9)
    assert gap.predicted_candidate_us == gap.predicted_custom_best_us == pytest.approx(
        t.latency.host_launch_us)


@pytest.mark.slow
def test_launch_and_unfused_closed_forms_when_the_gpu_binds() -> None:
    """Llama-70B row-parallel GEMM + 128 MiB all-reduce: the GPU's work hides the host's
    dispatch, so each term is its GPU part alone."""
    t = topo()
    lat = t.latency
    i = instantiate(load_task("13"), None, "llama70b-tp8")
    sloppy = inspection(mechanisms=["tma"], custom_kernels=3, device_barrier=True,
                        per_call_rendezvous=True)
    gap = decompose(i, t, 3000 * US, sloppy, simulate_fixes=False)
    expected = 2 * lat.kernel_launch_us + t.scale_up.signal_latency_us + 2 * lat.nccl_call_us
    assert gap.term("launch_sync_latency").model_us == pytest.approx(expected, rel=1e-12)
    one = decompose(i, t, 3000 * US, inspection(mechanisms=["tma"], custom_kernels=1),
                    simulate_fixes=False)
    passes_us = 2 * 128 * 2**20 / t.gpu.hbm_Bps / US  # the 128 MiB buffer written and re-read
    assert one.term("unfused_pytorch").model_us == pytest.approx(
        2 * lat.eager_kernel_us + passes_us, rel=1e-12)  # the GEMM and the clone, eager
    assert gap.term("unfused_pytorch").model_us == pytest.approx(passes_us, rel=1e-12)


@pytest.mark.parametrize(("task", "rel"), [("40", 1e-9), ("83", 1e-9), ("10", 0.12),
                                           ("21", 0.12), ("26", 0.02)])
def test_reference_model_agrees_with_the_simulator(task: str, rel: float) -> None:
    """T_model of PKB's reference (host dispatch against GPU work, plus host syncs) read off
    the chosen reference model is that model's simulated time: exactly on host-bound traced
    references without host syncs (the host's sum is the simulator's), within 12% where the
    traced program's syncs stop the host running ahead (T_model adds them after max(T_g, T_h)),
    and within 2% on a task without a trace (26: the task file's ops)."""
    from pkbsim.sim import Strategy, simulate

    i = inst(task)
    ref = reference_model(i)
    assert ref.source == ("task" if task == "26" else "trace")
    gap = decompose(i, topo(), 1.0, reference_inspection(i, ref), simulate_fixes=False,
                    reference=ref)
    assert gap.modeled_us == pytest.approx(gap.predicted_nccl_reference_us, rel=rel)
    shown = simulate(i, topo(), Strategy("nccl_reference"))  # what pkbsim simulate shows
    assert gap.predicted_nccl_reference_us == shown.predicted_us


# ---------------------------------------------------------------- combination

def test_terms_are_capped_at_the_gap() -> None:
    i = inst("83")
    roof = decompose(i, topo(), 1.0, None, simulate_fixes=False).t_roof_us
    gap = decompose(i, topo(), (roof + 5) * US, reference_inspection(i), simulate_fixes=False)
    assert 0 < gap.scale < 1 and any("scaled" in n for n in gap.notes)
    assert math.fsum(named(gap).values()) == pytest.approx(5, rel=1e-12)
    assert gap.term("residual").time_us == pytest.approx(0, abs=1e-9)
    for term in gap.terms[:-1]:
        assert term.time_us == pytest.approx(term.model_us * gap.scale, rel=1e-12)
    check_sum(gap)


def test_below_the_roofline_everything_is_residual() -> None:
    i = inst("1")
    roof = decompose(i, topo(), 1.0, None, simulate_fixes=False).t_roof_us
    gap = decompose(i, topo(), roof / 2 * US, reference_inspection(i), simulate_fixes=False)
    assert gap.gap_us == pytest.approx(-roof / 2) and gap.scale == 0
    assert all(v == 0 for v in named(gap).values())
    assert gap.term("residual").time_us == pytest.approx(-roof / 2) and gap.terms[-1].share == 1
    assert any("at or below t_roof" in n for n in gap.notes)


def test_without_inspection_the_gap_is_residual() -> None:
    gap = decompose(inst("1"), topo(), 50 * US)
    assert gap.term("residual").time_us == pytest.approx(gap.gap_us)
    assert all(t.fix is None for t in gap.terms[:-1]) and gap.predicted_candidate_us is None
    assert gap.term("residual").predicted_after_fix_us == gap.predicted_custom_best_us
    assert any("no inspection" in n for n in gap.notes)


def test_ranked_by_size_with_shares_and_the_residual_last() -> None:
    i = inst("13")
    gap = decompose(i, topo(), 200 * US, reference_inspection(i))
    assert [t.name for t in gap.terms][-1] == "residual"
    assert sorted(t.name for t in gap.terms) == sorted(TERMS)
    sizes = [t.time_us for t in gap.terms[:-1]]
    assert sizes == sorted(sizes, reverse=True) and sizes[0] > 0
    for term in gap.terms:
        assert term.share == pytest.approx(term.time_us / gap.gap_us)
        assert (term.fix is None) == (term.time_us <= 0 and term.name != "residual")
    assert gap.attainment == pytest.approx(gap.t_roof_us / 200)


inspections = st.fixed_dictionaries(
    {"mechanisms": st.lists(st.sampled_from(MECHANISMS), max_size=3, unique=True),
     "nccl_on_hot_path": st.lists(st.sampled_from(
         ["all_reduce", "all_to_all_single", "barrier (metadata)", "all_gather_object",
          "get_rank"]), max_size=3),
     "custom_kernels": st.integers(0, 4), "host_syncs": st.integers(0, 5),
     **{f: st.booleans() for f in FLAGS}})


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(task=st.sampled_from(["1", "13", "83"]), found=inspections,
       factor=st.floats(0.2, 40.0))
def test_terms_sum_exactly_to_the_gap(task: str, found: dict[str, Any], factor: float) -> None:
    i = inst(task)
    roof = decompose(i, topo(), 1.0, None, simulate_fixes=False).t_roof_us
    gap = decompose(i, topo(), roof * factor * US, found, simulate_fixes=False)
    check_sum(gap)
    values = named(gap)
    assert all(v >= 0 for v in values.values()) and gap.terms[-1].name == "residual"
    assert math.fsum(values.values()) <= max(gap.gap_us, 0) * (1 + 1e-12) + 1e-12
    assert list(values.values()) == sorted(values.values(), reverse=True)
    if gap.scale == 1.0:  # uncapped: named terms are the model, the residual what is left
        assert gap.t_roof_us + math.fsum(values.values()) == pytest.approx(gap.modeled_us)


# ---------------------------------------------------------------- evidence and inputs

def test_evidence_lines_count_syncs_and_barrier_calls() -> None:
    found = inspection(mechanisms=["tma"], host_sync=True, nccl_on_hot_path=[
        "barrier (metadata)"], evidence={"host_sync": [[12, "n = x.item()"], [30, "sync()"]]})
    gap = decompose(inst("2"), topo(), 300 * US, found, simulate_fixes=False)
    assert "host_sync (lines 12, 30): 2 synchronisation(s)" in gap.term("host_sync").evidence
    assert "one dist.barrier per call" in gap.term("launch_sync_latency").evidence


def test_nccl_call_on_the_hot_path_decides_the_carrier() -> None:
    found = inspection(mechanisms=["nccl_payload", "tma"],
                       nccl_on_hot_path=["all_gather_into_tensor"])
    gap = decompose(inst("grpo"), topo(), 300 * US, found, simulate_fixes=False)
    assert {o.op: o.carried_by for o in gap.ops} == {"a2a_logits": "tma",
                                                     "ag_logprobs": "nccl_payload"}


def test_mechanism_the_topology_lacks_is_noted() -> None:
    gap = decompose(inst("1"), topo("dgx-a100"), 300 * US,
                    inspection(mechanisms=["nvls_multimem"]), simulate_fixes=False)
    assert gap.ops[0].carried_by is None
    assert any("dgx-a100 has no nvls_multimem" in n for n in gap.notes)
    assert "no listed mechanism carries ar" in gap.term("residual").evidence


def test_reference_inspection_reads_the_task_without_a_trace() -> None:
    i = inst("26")  # moe_token_preprocess: no traced program shipped
    found = reference_inspection(i)
    assert reference_model(i).source == "task" and "program" not in found
    assert found["mechanisms"] == ["nccl_payload"] and found["custom_kernels"] == 0
    assert found["host_sync"] is True
    assert found["host_syncs"] == sum(o.host_syncs * o.repeat for o in i.ops) > 0
    assert found["nccl_on_hot_path"] == sorted({o.api for o in i.ops if isinstance(o, CommOp)})


def test_reference_inspection_reads_the_traced_program() -> None:
    i = inst("grpo")
    ref = reference_model(i)
    assert ref.program is not None
    found = reference_inspection(i, ref)
    segments = ref.program.program.segments
    assert found["program"] is ref.program.program and found["custom_kernels"] == 0
    assert found["nccl_on_hot_path"] == sorted({s.collective.name for s in segments
                                                if s.collective is not None})
    assert found["host_syncs"] == sum(s.times for s in segments if s.end == "sync")
    # the task file names all_to_all_single; the trace records what PyTorch dispatched
    assert found["nccl_on_hot_path"] != reference_inspection(
        i, ReferenceModel(i, Strategy("nccl_reference", reference="task"), "task"))[
        "nccl_on_hot_path"]


def test_failed_inspection_counts_as_none() -> None:
    gap = decompose(inst("1"), topo(), 50 * US, {"error": "SyntaxError at line 3"},
                    simulate_fixes=False)
    assert gap.term("residual").time_us == pytest.approx(gap.gap_us)
    assert any("inspection failed (SyntaxError at line 3)" in n for n in gap.notes)


@pytest.mark.parametrize(("found", "expected"), [
    ({"nccl_on_hot_path": []}, "mechanisms: expected a list"),
    ({"mechanisms": "tma"}, "mechanisms: expected a list"),
    ({"mechanisms": ["warp_specialized"]}, "mechanisms: unknown 'warp_specialized'"),
    ({"mechanisms": [], "nccl_on_hot_path": "all_reduce"}, "nccl_on_hot_path: expected a list"),
    ({"mechanisms": [], "one_shot": "yes"}, "one_shot: expected true or false"),
    ({"mechanisms": [], "custom_kernels": -1}, "custom_kernels: expected a whole number"),
    ({"mechanisms": [], "host_sync": True, "host_syncs": 1.5}, "host_syncs: expected a whole"),
    ({"mechanisms": [], "evidence": [1, 2]}, "evidence: expected a mapping"),
])
def test_bad_inspection(found: dict[str, Any], expected: str) -> None:
    with pytest.raises(PkbsimError) as info:
        decompose(inst("1"), topo(), 50 * US, found, simulate_fixes=False)
    assert info.value.one_line() == f"inspection: {expected}" or expected in info.value.one_line()


@pytest.mark.parametrize("measured", [0.0, -1e-6, float("nan")])
def test_bad_measured_time(measured: float) -> None:
    with pytest.raises(PkbsimError, match="measured time must be above 0"):
        decompose(inst("1"), topo(), measured)


# ---------------------------------------------------------------- metadata calls (issue 32)

COUNTS = {"line": 23, "call": "all_gather_into_tensor", "kind": "nccl_metadata", "path": "hot",
          "condition": "", "source": "static", "snippet": "", "elements": 8, "dtype": "int64"}


def _meta_gap(site: dict[str, Any] | None) -> Gap:
    i = instantiate(load_task("2"), 8, "nccl-1gib")  # GPU-bound: the host's dispatch hides
    roof = decompose(i, topo(), 1.0, None, simulate_fixes=False).t_roof_us
    found = inspection(mechanisms=["sm_peer_ldst"], custom_kernels=1,
                       nccl_on_hot_path=["all_gather_into_tensor (metadata)"],
                       call_sites=[site] if site else [])
    return decompose(i, topo(), (roof + 5000) * US, found, simulate_fixes=False)


def test_a_metadata_call_names_its_size_and_simulated_latency() -> None:
    gap = _meta_gap(COUNTS)
    latency = simulate_nccl_call(topo(), "all_gather", 8 * 8, 8).time_s / US
    assert 5 < latency < topo().latency.nccl_call_us  # a 64-byte all-gather, launch included
    term = gap.term("launch_sync_latency")
    assert (f"1 metadata call(s): an NCCL all-gather of 8 int64 value(s) (line 23) on every "
            f"call: about {latency:.3g} us of latency") in term.evidence
    assert term.model_us == pytest.approx(latency, rel=1e-9)  # one kernel: no extra launch
    assert "exchange counts, flags and norms inside the kernel" in (term.fix or "").lower()
    assert gap.ops[0].carried_by == "sm_peer_ldst"  # the metadata call carries no payload
    check_sum(gap)


def test_a_metadata_call_of_unknown_size_costs_nccl_call_us() -> None:
    gap = _meta_gap(None)  # only the "(metadata)" mark on the hot path
    term = gap.term("launch_sync_latency")
    n_c = topo().latency.nccl_call_us
    assert f"an NCCL all-gather, size unknown, on every call: about {n_c:g} us" in term.evidence
    assert term.model_us == pytest.approx(n_c, rel=1e-9)
    check_sum(gap)
    sized = _meta_gap(COUNTS)
    assert sized.modeled_us - gap.modeled_us == pytest.approx(
        sized.term("launch_sync_latency").model_us - n_c, rel=1e-9)


def test_a_metadata_collective_does_not_make_nccl_carry_the_payload() -> None:
    """The counts all-gather of an all-to-all + all-gather task: the all-gather op stays on
    the custom mechanism; only the payload call names an NCCL-carried kind."""
    found = inspection(mechanisms=["nccl_payload", "tma"],
                       nccl_on_hot_path=["all_to_all_single", "all_gather_into_tensor (metadata)"],
                       call_sites=[COUNTS])
    gap = decompose(inst("grpo"), topo(), 300 * US, found, simulate_fixes=False)
    assert {o.op: o.carried_by for o in gap.ops} == {"a2a_logits": "nccl_payload",
                                                     "ag_logprobs": "tma"}
    assert "all-gather of 8 int64 value(s)" in gap.term("launch_sync_latency").evidence
    check_sum(gap)


def test_bad_call_sites_are_named() -> None:
    bad = inspection(mechanisms=[], call_sites=[{**COUNTS, "elements": -1}])
    with pytest.raises(PkbsimError, match="whole number") as raised:
        decompose(inst("2"), topo(), 300 * US, bad, simulate_fixes=False)
    assert "call_sites[0].elements" in raised.value.one_line()
