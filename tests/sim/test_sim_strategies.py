"""Whole-task simulations: nccl_reference and custom_best on the shipped tasks and topologies."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import yaml
from paths import ROOT

from pkbsim.analysis import analyze
from pkbsim.collectives import ALGORITHMS
from pkbsim.collectives.base import Context
from pkbsim.errors import InfeasibleError, UsageError
from pkbsim.sim import simulate, simulate_collective
from pkbsim.sim.collective import CallSpec
from pkbsim.sim.engine import Collective, Compute, SimOptions, Simulation
from pkbsim.sim.result import OpTiming, SimResult
from pkbsim.sim.run import load_strategy, run_simulation
from pkbsim.sim.strategies import OpOverride, Strategy
from pkbsim.task.loader import instantiate, list_tasks, load_task
from pkbsim.task.schema import CommOp
from pkbsim.topology.loader import load_topology

US = 1e-6


def by_id(result: SimResult, op_id: str) -> OpTiming:
    return next(o for o in result.ops if o.id == op_id)


# ------------------------------------------------------------------ determinism

@pytest.mark.parametrize(("task", "strategy"), [("grpo", "custom_best"),
                                                ("13", "nccl_reference"),
                                                ("85", "nccl_reference")])
def test_same_inputs_same_prediction_and_timeline(task: str, strategy: str) -> None:
    a = run_simulation(task, strategy)
    b = run_simulation(task, strategy)
    assert a.predicted_us == b.predicted_us
    assert a.per_rank_us == b.per_rank_us
    assert a.nodes == b.nodes
    assert (a.flows_started, a.rate_updates) == (b.flows_started, b.rate_updates)


def test_warm_caches_do_not_change_results() -> None:
    """One topology object twice: the second run finds the fabric's caches filled."""
    topo = load_topology("dgx-h100")
    inst = instantiate(load_task("13"))
    first = simulate(inst, topo, Strategy("custom_best"))
    second = simulate(inst, topo, Strategy("custom_best"))
    assert first.predicted_us == second.predicted_us and first.nodes == second.nodes
    cold = simulate(inst, load_topology("dgx-h100"), Strategy("custom_best"))
    assert cold.predicted_us == first.predicted_us and cold.nodes == first.nodes


# ------------------------------------------------------------------ nccl_reference

def test_grpo_reference_is_host_bound_at_the_pkb_preset() -> None:
    """Every op of one iteration is dispatched by one Python thread: the predicted time is the
    sum of the host costs, from the task and topology files."""
    inst = instantiate(load_task("grpo"), None, "pkb")
    lat = yaml.safe_load((ROOT / "topologies" / "dgx-h100.yaml").read_text())["latency"]
    raw_ops = {op["id"]: op for op in yaml.safe_load(
        next((ROOT / "tasks").glob("83_*.yaml")).read_text())["ops"]}
    host_us: dict[str, float] = {}
    for op in inst.ops:
        assert op.host_syncs == 0  # no stream drains: dispatch alone sets the pace
        if isinstance(op, CommOp):
            host_us[op.id] = op.repeat * lat["host_collective_us"]
        else:
            launches = int(raw_ops[op.id].get("launches", 1))
            host_us[op.id] = max(op.repeat * launches, 1) * lat["host_launch_us"]
    expected = sum(host_us.values())
    r = run_simulation("grpo", "nccl_reference", preset="pkb", reference_model="task")
    assert r.predicted_us == pytest.approx(expected, rel=1e-9)
    for op_id, us in host_us.items():
        assert by_id(r, op_id).host_us == pytest.approx(us, rel=1e-9)
    assert sum(o.gpu_us for o in r.ops) < expected  # the GPU waits for the host


def test_host_syncs_become_sync_nodes_after_the_gpu_work() -> None:
    r = run_simulation("85", "nccl_reference", reference_model="task")
    inst = r.instance
    host_sync_us = r.topology.latency.host_sync_us
    expected = {op.id: op.host_syncs * op.repeat for op in inst.ops if op.host_syncs}
    assert expected, "task 85 has host syncs"
    syncs = [n for n in r.nodes if n.name.endswith(":sync")]
    for it in range(r.iterations):
        for rank in range(inst.world_size):
            counts = Counter(n.name.split(":")[0] for n in syncs
                             if n.iteration == it and n.rank == rank)
            wanted = {op.id: op.host_syncs * op.repeat for op in inst.ops
                      if op.host_syncs and (isinstance(op, CommOp) or op.runs_on(rank))}
            assert counts == wanted, (it, rank)
    for s in syncs:
        assert s.track == "host"
        assert s.end_us - s.start_us == pytest.approx(host_sync_us, abs=1e-6)
        # a sync drains the stream: the GPU work of its op on that rank is done first
        gpu = [n for n in r.nodes if n.track != "host" and n.rank == s.rank
               and n.iteration == s.iteration and n.name == s.name.split(":")[0]
               and n.end_us <= s.ready_us + 1e-6]
        assert gpu, s
    assert expected.keys() <= {n.name.split(":")[0] for n in syncs}
    custom = run_simulation("85", "custom_best")
    assert not [n for n in custom.nodes if n.name.endswith(":sync")]  # a fused kernel has none


# ------------------------------------------------------------------ custom_best vs reference

@pytest.mark.slow
def test_custom_best_never_slower_than_reference_on_any_shipped_task() -> None:
    """Every task at its default world size, preset pkb, dgx-h100; both also sit on or above
    the roofline."""
    checked, problems = 0, []
    for path in list_tasks():
        try:
            ref = run_simulation(str(path), "nccl_reference")
            best = run_simulation(str(path), "custom_best")
        except InfeasibleError:
            continue
        checked += 1
        roof_us = analyze(str(path)).roofline.t_roof_s / US
        if best.predicted_us > ref.predicted_us * (1 + 1e-9):
            problems.append(f"{path.stem}: custom_best {best.predicted_us} > reference "
                            f"{ref.predicted_us}")
        for name, res in (("nccl_reference", ref), ("custom_best", best)):
            if res.predicted_us < roof_us * (1 - 1e-9):
                problems.append(f"{path.stem}: {name} {res.predicted_us} < t_roof {roof_us}")
    assert checked >= 80
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("task", ["1", "2", "7", "8", "13", "14", "54", "79", "83"])
@pytest.mark.parametrize("strategy", ["nccl_reference", "custom_best"])
def test_prediction_is_at_least_the_roofline(task: str, strategy: str) -> None:
    roof = analyze(task).roofline
    r = run_simulation(task, strategy)
    assert r.predicted_us * US >= roof.t_roof_s * (1 - 1e-9)
    # each term on its own is a bound too
    for term in (roof.t_comm_s, roof.t_mem_s, roof.t_comp_s, roof.t_latency_floor_s):
        assert r.predicted_us * US >= term * (1 - 1e-9)


# ------------------------------------------------------------------ overrides

def test_override_changes_the_choice_of_that_op_only() -> None:
    plain = run_simulation("grpo", "custom_best")
    forced = run_simulation("grpo", "custom_best",
                            overrides={"a2a_logits.mechanism": "copy_engine"})
    assert by_id(plain, "a2a_logits").choice.mechanism != "copy_engine"
    assert by_id(forced, "a2a_logits").choice.mechanism == "copy_engine"
    assert by_id(forced, "a2a_logits").choice.sms == 0  # copy engines hold no SMs
    assert by_id(forced, "ag_logprobs").choice == by_id(plain, "ag_logprobs").choice
    # custom_best picks the fastest at each size; forcing another mechanism cannot help
    assert forced.predicted_us >= plain.predicted_us


def test_impossible_override_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="ar"):
        run_simulation("1", "custom_best", overrides={"ar.mechanism": "copy_engine"})
    with pytest.raises(UsageError):
        run_simulation("1", "custom_best", overrides={"nope.mechanism": "tma"})
    with pytest.raises(UsageError):
        run_simulation("1", "custom_best", overrides={"ar.colour": "blue"})
    with pytest.raises(UsageError):
        run_simulation("1", "nccl_reference", overrides={"ar.protocol": "LL64"})


def test_impossible_mechanism_override_is_a_usage_error_for_nccl_reference() -> None:
    with pytest.raises(UsageError):
        run_simulation("1", "nccl_reference", overrides={"ar.mechanism": "copy_engine"})


def test_strategy_file(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump({"base": "custom_best", "chunks": 2,
                                    "ops": {"a2a_logits": {"mechanism": "tma", "sms": 8}}}))
    strategy = load_strategy(str(path))
    assert strategy.name == "custom_best" and strategy.chunks == 2
    assert strategy.overrides == {"a2a_logits": OpOverride(mechanism="tma", sms=8)}
    assert strategy.source == str(path)
    # --override on top of a file keeps the file's other keys
    merged = load_strategy(str(path), {"a2a_logits.sms": "4"})
    assert merged.overrides["a2a_logits"] == OpOverride(mechanism="tma", sms=4)
    r = run_simulation("grpo", str(path))
    assert r.pieces == 2 and not r.tried  # a fixed chunk count: nothing else is tried
    choice = by_id(r, "a2a_logits").choice
    assert (choice.mechanism, choice.sms, choice.pieces) == ("tma", 8, 2)
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"base": "custom_best", "ops": {"a2a_logits": {"sms": -1}}}))
    with pytest.raises(UsageError):
        load_strategy(str(bad))


# ------------------------------------------------------------------ SM contention

@pytest.mark.parametrize("strategy", ["custom_best", "nccl_reference"])
def test_fewer_sms_slow_the_op_down(strategy: str) -> None:
    base = {"a2a_logits.mechanism": "tma"} if strategy == "custom_best" else {}
    wide = run_simulation("grpo", strategy, preset="blog-1k", overrides=base,
                          reference_model="task")
    narrow = run_simulation("grpo", strategy, preset="blog-1k",
                            overrides={**base, "a2a_logits.sms": "2"}, reference_model="task")
    assert by_id(narrow, "a2a_logits").choice.sms == 2
    assert by_id(narrow, "a2a_logits").gpu_us > 2 * by_id(wide, "a2a_logits").gpu_us
    assert narrow.predicted_us >= wide.predicted_us


def test_sms_held_by_communication_slow_concurrent_compute() -> None:
    """A compute-bound kernel (every SM for t) next to a collective holding h of the 132 SMs for
    D seconds: it runs at (132 - h)/132 of its speed until D, then at full speed."""
    topo = load_topology("dgx-h100")
    sms, held, t = topo.gpu.sm_count, 66, 400 * US
    mech = topo.mechanisms["tma"]
    spec = CallSpec(ALGORITHMS["ring"], mech, "all_reduce", 16 << 20, Context(n=2), 1,
                    mech.latency_s, mech.step_latency_s, 0.0, held, "ar")
    sim = Simulation(topo, 2, SimOptions(iterations=1, hbm_contention=False))
    run = sim.collective(spec, [0, 1])
    comm = [sim.node(r, "stream0", "ar", 0, Collective(run, r)) for r in range(2)]
    work = sim.node(0, "stream1", "gemm", 0, Compute(t, 0.0))
    sim.run()
    d = comm[0].end
    assert d == pytest.approx(simulate_collective(topo, "all_reduce", 16 << 20, 2, "ring", "tma",
                                                  comm_sms=held).time_s, rel=1e-12)
    assert d < t
    expected = d + (t - d * (sms - held) / sms)
    assert work.end == pytest.approx(expected, rel=1e-9)
    assert sim.comm_sm_seconds[0] == pytest.approx(held * d, rel=1e-9)


def test_simulate_rejects_a_world_larger_than_the_machine() -> None:
    inst = instantiate(load_task("1"), 16)
    with pytest.raises(InfeasibleError):
        simulate(inst, load_topology("dgx-h100"), Strategy("nccl_reference"))


def test_the_sweep_exercises_the_main_comm_kinds() -> None:
    """Sanity of the sweep above: the shipped tasks use the main collective kinds."""
    kinds = set()
    for path in list_tasks():
        try:
            inst = instantiate(load_task(str(path)))
        except InfeasibleError:
            continue
        kinds |= {op.kind for op in inst.ops if isinstance(op, CommOp)}
    assert {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast"} <= kinds


def test_kernel_ramp_and_eager_launch_are_charged_to_kernels() -> None:
    """latency.kernel_ramp_us is added to every kernel that moves data (reference: each
    kernel; custom_best: its one fused kernel); a --set of an optional field works."""
    from pkbsim.sim.run import run_simulation

    def t(strategy: str, **sets: float) -> float:
        return run_simulation("1", strategy, "dgx-h200", None, "pkb",
                              {k: str(v) for k, v in sets.items()}, {}, 3,
                              reference_model="task").predicted_us

    for strategy in ("nccl_reference", "custom_best"):
        plain = t(strategy)
        ramped = t(strategy, **{"latency.kernel_ramp_us": 500.0})
        assert ramped - plain >= 450.0, strategy
        eager = t(strategy, **{"latency.eager_launch_us": 500.0})
        assert eager - plain >= 450.0, strategy
