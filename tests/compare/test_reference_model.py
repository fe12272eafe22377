"""One model of PKB's reference everywhere: the predicted nccl_reference time pkbsim compare
shows, the reference's gap decomposition, every what-if that starts from the reference, the
timeline and a sweep's nccl_reference all run the model ``reference_model`` chooses (the
traced program when one is shipped, else the task file's ops), and the output says which."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from functools import cache
from pathlib import Path

import pytest

from pkbsim.cli.compare import compare_command
from pkbsim.comparator.comparison import Comparison, compare_problem, reference_timeline
from pkbsim.comparator.reference import NO_TRACE, OVERRIDDEN, reference_model
from pkbsim.datafiles import data_dir
from pkbsim.pkb.logs import from_value
from pkbsim.planning.evaluate import Target, evaluate
from pkbsim.sim import Strategy, simulate
from pkbsim.sim.strategies import OpOverride
from pkbsim.task.loader import instantiate, load_task
from pkbsim.task.schema import TaskInstance
from pkbsim.topology import load_topology
from pkbsim.topology.schema import Topology
from pkbsim.trace.store import reference_program


@cache
def topo() -> Topology:
    return load_topology("dgx-h100")


def compared(inst: TaskInstance) -> Comparison:
    """The reference measured well above the model (every cause keeps its fix) and a
    candidate without a solution file."""
    meas = [from_value(5000.0, inst.spec.key, "reference"),
            from_value(4000.0, inst.spec.key, "cuda")]
    return compare_problem(inst, topo(), meas)


def check_one_reference(c: Comparison, inst: TaskInstance) -> None:
    """The decomposition's reference times are the prediction shown, on one model."""
    shown = simulate(inst, topo(), Strategy("nccl_reference"))  # pkbsim simulate's model
    assert c.predicted_nccl_reference_us == shown.predicted_us
    ref = c.reference
    assert ref is not None
    # the reference as the simulator expresses it: the very prediction the table shows
    assert ref.gap.predicted_candidate_us == c.predicted_nccl_reference_us
    for v in c.variants:
        assert v.gap.predicted_nccl_reference_us == c.predicted_nccl_reference_us
        assert v.gap.reference_model == c.reference_model.label
    assert reference_timeline(c, topo()).predicted_us == c.predicted_nccl_reference_us


@pytest.mark.parametrize(("task", "w"), [("1", 8), ("1", 1), ("grpo", 8), ("grpo", 1)])
def test_traced_task_decomposes_the_shown_prediction(task: str, w: int) -> None:
    inst = instantiate(load_task(task), w)
    chosen = reference_program(inst)
    assert chosen is not None
    c = compared(inst)
    assert c.reference_model.source == "trace"
    assert c.reference_model.label == chosen.describe()
    check_one_reference(c, inst)


@pytest.mark.parametrize("task", ["19", "26"])
def test_task_without_a_trace_decomposes_the_task_model(task: str) -> None:
    inst = instantiate(load_task(task), 8)
    assert reference_program(inst) is None
    c = compared(inst)
    assert (c.reference_model.source, c.reference_model.label) == ("task", NO_TRACE)
    check_one_reference(c, inst)


def test_a_task_file_of_ones_own_runs_the_task_model(tmp_path: Path) -> None:
    """The same problem from a copied task file has no shipped trace: the task file's model,
    and the output says so."""
    own = tmp_path / "my_allreduce.yaml"
    shutil.copy(data_dir("tasks") / "1_allreduce.yaml", own)
    inst = instantiate(load_task(str(own)), 8)
    c = compared(inst)
    assert c.reference_model.source == "task"
    check_one_reference(c, inst)
    traced = compared(instantiate(load_task("1"), 8))
    assert traced.reference_model.source == "trace"
    assert traced.predicted_nccl_reference_us != c.predicted_nccl_reference_us


def test_host_sync_what_if_runs_the_traced_program() -> None:
    inst = instantiate(load_task("21"), 8)  # its traced program synchronises with the host
    c = compared(inst)
    assert c.reference is not None
    term = c.reference.gap.term("host_sync")
    without = c.reference_model.without_host_syncs()
    assert without.source == "trace" and without is not c.reference_model
    assert term.predicted_after_fix_us == without.simulate(topo()).predicted_us
    no_syncs = replace(inst, ops=tuple(replace(o, host_syncs=0) for o in inst.ops))
    task_fix = simulate(no_syncs, topo(), Strategy("nccl_reference", reference="task"))
    assert term.predicted_after_fix_us != task_fix.predicted_us  # not the task file's model


def test_output_says_which_model(tmp_path: Path) -> None:
    out = tmp_path / "c.json"
    compare_command("1", None, 60.0, None, None, "dgx-h100", 8, "pkb", "json", out, None,
                    simulate_fixes=False)
    (problem,) = json.loads(out.read_text())["problems"]
    label = reference_program(instantiate(load_task("1"), 8)).describe()  # type: ignore[union-attr]
    assert problem["reference_model"] == {"source": "trace", "label": label}
    table = tmp_path / "c.txt"
    compare_command("19", None, 200.0, None, None, "dgx-h100", 8, "pkb", "table", table, None,
                    simulate_fixes=False)
    text = " ".join(table.read_text().split())
    assert f"reference model of 19_blocked_fp8_quantize: {NO_TRACE}" in text


@pytest.mark.parametrize("task", ["1", "19"])
def test_sweep_nccl_reference_is_the_compared_prediction(task: str) -> None:
    inst = instantiate(load_task(task), 8)
    row = evaluate(Target(task=task), {"world_size": 8}, ["nccl_reference"])
    assert row["nccl_reference_us"] == compared(inst).predicted_nccl_reference_us


def test_overrides_name_the_task_files_ops() -> None:
    inst = instantiate(load_task("1"), 8)
    comm = next(o.id for o in inst.ops if o.category == "comm")
    ref = reference_model(inst, {comm: OpOverride(algorithm="ring")})
    assert (ref.source, ref.label) == ("task", OVERRIDDEN)
    row = evaluate(Target(task="1"), {"world_size": 8, "algorithm": "ring"},
                   ["nccl_reference"])
    assert row["nccl_reference_us"] == ref.simulate(topo()).predicted_us
