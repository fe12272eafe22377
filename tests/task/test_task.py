from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from paths import ROOT

from pkbsim.errors import InfeasibleError, TaskError, UsageError
from pkbsim.task.loader import find_task, instantiate, load_task
from pkbsim.task.schema import CommOp, ComputeOp

GRPO = ROOT / "tasks" / "83_vocab_parallel_log_prob_topk_chunked.yaml"


@pytest.fixture
def grpo_data() -> dict:
    return yaml.safe_load(GRPO.read_text())


@pytest.mark.parametrize("name", ["grpo", "83", "vocab_parallel_log_prob_topk_chunked",
                                  "83_vocab_parallel_log_prob_topk_chunked", str(GRPO)])
def test_every_way_to_name_a_task(name: str) -> None:
    assert find_task(name).name == GRPO.name


def test_unknown_task_suggests_nearest() -> None:
    with pytest.raises(UsageError, match="did you mean vocab_parallel_log_prob_topk_chunked"):
        find_task("vocab_parallel_log_prob_topk_chunkd")


def test_grpo_matches_the_catalogue() -> None:
    """PKB reference/83_vocab_parallel_log_prob_topk_chunked.py @3cc0f9b: A2A 1,024 B and AG
    fp32 8 B per rank, 1 chunk at W = 8."""
    spec = load_task("grpo")
    inst = instantiate(spec, 8)
    a2a, compute, ag = inst.ops
    assert isinstance(a2a, CommOp) and isinstance(ag, CommOp) and isinstance(compute, ComputeOp)
    assert (a2a.kind, a2a.bytes_per_rank, a2a.repeat) == ("all_to_all", 1024, 1)
    assert (ag.kind, ag.bytes_per_rank, ag.dtype) == ("all_gather", 8, "fp32")
    at4 = instantiate(spec, 4)  # chunk 4 -> 2 chunks
    assert at4.values["n_chunks"] == 2 and at4.ops[0].bytes_per_rank == 1024


def test_blog_preset_sets_world_size_and_sizes() -> None:
    inst = instantiate(load_task("grpo"), None, "blog-16k")
    assert inst.world_size == 4
    assert inst.values["vocab"] == 32000 and inst.values["seq"] == 16384
    assert inst.ops[0].bytes_per_rank == 4096 * 8000 * 2  # chunk tokens x local vocab x bf16


def test_set_overrides_params_and_derived() -> None:
    inst = instantiate(load_task("grpo"), 8, "pkb", {"vocab": 1024, "seq": 16})
    assert inst.values["local_vocab"] == 128
    assert inst.values["seq"] == 16


def test_unknown_set_key_and_preset() -> None:
    spec = load_task("grpo")
    with pytest.raises(UsageError, match="unknown --set key 'hidden'"):
        instantiate(spec, 8, "pkb", {"hidden": 1})
    with pytest.raises(UsageError, match="no preset 'huge'"):
        instantiate(spec, 8, "huge")


def test_world_size_constraint_names_itself() -> None:
    with pytest.raises(InfeasibleError, match=r"constraint 'vocab % W == 0' fails"):
        instantiate(load_task("grpo"), 3)
    with pytest.raises(InfeasibleError, match="at least 1"):
        instantiate(load_task("grpo"), 0)


def _load(data: dict, tmp_path: Path) -> object:
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    spec = load_task(str(path))
    return instantiate(spec, 8)


def _edit(data: dict, fn) -> dict:
    out = copy.deepcopy(data)
    fn(out)
    return out


@pytest.mark.parametrize(
    ("edit", "field", "message"),
    [
        (lambda d: d.pop("name"), "name", "required"),
        (lambda d: d["ops"][0].update(kind="all_reduse"), "ops[0].kind", "expected one of"),
        (lambda d: d["ops"][0].update(colour="red"), "ops[0].colour", "unknown field"),
        (lambda d: d["ops"][0].update(bytes_per_rank=4), "ops[0].bytes_per_rank",
         "exactly one of"),
        (lambda d: d["ops"][0].update(elements_per_rank="chunk_tokens *"),
         "ops[0].elements_per_rank", "cannot parse"),
        (lambda d: d["ops"][0].update(elements_per_rank="hidden * 2"),
         "ops[0].elements_per_rank", "unknown name 'hidden'"),
        (lambda d: d["ops"][0].update(elements_per_rank="__import__('os')"),
         "ops[0].elements_per_rank", None),
        (lambda d: d["ops"][0].update(dtype="bf17"), "ops[0].dtype", "unknown dtype"),
        (lambda d: d["ops"][0].update(group="tp"), "ops[0].group", "unknown group"),
        (lambda d: d["ops"][0].update(reduce_op="sum"), "ops[0].reduce_op", "only"),
        (lambda d: d["ops"][0].update(after=["ag_logprobs"]), "ops[0].after",
         "not an earlier op"),
        (lambda d: d["ops"][1].pop("flops"), "ops[1].flops", "required"),
        (lambda d: d["presets"].pop("pkb"), "presets", "must define preset 'pkb'"),
        (lambda d: d["presets"]["blog-1k"]["set"].update(hidden=1),
         "presets.blog-1k.set.hidden", "not a parameter"),
        (lambda d: d["params"].update(W=3), "params.W", "not a usable"),
        (lambda d: d["ops"][1].update(id="a2a_logits"), "ops[1].id", "unique"),
    ],
)
def test_bad_task_names_file_and_field(grpo_data: dict, tmp_path: Path, edit, field: str,
                                       message: str | None) -> None:
    with pytest.raises(TaskError) as info:
        _load(_edit(grpo_data, edit), tmp_path)
    assert info.value.file == str(tmp_path / "t.yaml")
    assert info.value.field == field
    if message:
        assert message in info.value.message


def test_negative_size_is_an_error(grpo_data: dict, tmp_path: Path) -> None:
    data = _edit(grpo_data, lambda d: d["ops"][0].update(elements_per_rank="0 - W"))
    with pytest.raises(TaskError, match="expected >= 0"):
        _load(data, tmp_path)


def test_group_must_divide_world(grpo_data: dict, tmp_path: Path) -> None:
    def add_group(d: dict) -> None:
        d["groups"] = {"tp": {"size": 3}}
        d["ops"][0]["group"] = "tp"

    with pytest.raises(InfeasibleError, match="group 'tp' has size 3, which must divide 8"):
        _load(_edit(grpo_data, add_group), tmp_path)


def test_groups_and_dependencies(grpo_data: dict, tmp_path: Path) -> None:
    def edit(d: dict) -> None:
        d["groups"] = {"tp": {"size": "W // 4", "layout": "strided"}}
        d["ops"][2]["group"] = "tp"
        d["ops"][2]["after"] = []

    inst = _load(_edit(grpo_data, edit), tmp_path)
    ag = inst.ops[2]
    assert (ag.group, ag.group_size, ag.group_layout, ag.after) == ("tp", 2, "strided", ())
    assert inst.ops[1].after == ("a2a_logits",)


def test_rank_roles_are_checked(grpo_data: dict, tmp_path: Path) -> None:
    data = _edit(grpo_data, lambda d: d["ops"][1].update(ranks="leader"))
    with pytest.raises(TaskError, match="expected one of: all, root, non_root"):
        _load(data, tmp_path)
    data = _edit(grpo_data, lambda d: d["ops"][1].update(root=1))
    with pytest.raises(TaskError, match="only ops with ranks: root or non_root take a root"):
        _load(data, tmp_path)
    data = _edit(grpo_data, lambda d: d["ops"][1].update(ranks="root", root=9))
    with pytest.raises(InfeasibleError, match="outside the world of 8"):
        _load(data, tmp_path)


def test_production_preset_is_marked_once(grpo_data: dict, tmp_path: Path) -> None:
    def mark(*names: str):
        def edit(d: dict) -> None:
            for preset in d["presets"].values():
                preset.pop("production", None)
            for name in names:
                d["presets"][name]["production"] = True
        return edit

    spec_path = tmp_path / "t.yaml"
    spec_path.write_text(yaml.safe_dump(_edit(grpo_data, mark("blog-16k")), sort_keys=False))
    spec = load_task(str(spec_path))
    assert spec.production_preset == "blog-16k"
    assert instantiate(spec, None, "production").preset == "blog-16k"
    with pytest.raises(TaskError, match="only one preset may be marked production") as info:
        _load(_edit(grpo_data, mark("blog-1k", "blog-16k")), tmp_path)
    assert info.value.field == "presets.blog-16k.production"
    with pytest.raises(TaskError, match="not production"):
        _load(_edit(grpo_data, mark("pkb")), tmp_path)
    reserved = _edit(grpo_data, lambda d: d["presets"].update(
        production={"description": "x"}))
    with pytest.raises(TaskError, match="reserved"):
        _load(reserved, tmp_path)


def test_no_production_preset_is_a_usage_error(grpo_data: dict, tmp_path: Path) -> None:
    for preset in grpo_data["presets"].values():
        preset.pop("production", None)
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(grpo_data, sort_keys=False))
    with pytest.raises(UsageError, match="has no production preset"):
        instantiate(load_task(str(path)), 8, "production")


def test_rotate_root_and_compute_imbalance_are_checked(grpo_data: dict, tmp_path: Path) -> None:
    data = _edit(grpo_data, lambda d: d["ops"][0].update(rotate_root=True))
    with pytest.raises(TaskError, match="only broadcast, reduce, scatter, gather take a "
                                        "rotate_root"):
        _load(data, tmp_path)
    data = _edit(grpo_data, lambda d: d["ops"][1].update(imbalance=0.5))
    with pytest.raises(TaskError, match="the largest rank over the mean is >= 1"):
        _load(data, tmp_path)
    inst = _load(_edit(grpo_data, lambda d: d["ops"][1].update(imbalance="2 * W / (W + 1)")),
                 tmp_path)
    assert inst.ops[1].imbalance == pytest.approx(16 / 9)


def test_world_sizes_are_those_the_task_takes() -> None:
    from pkbsim.task.loader import world_sizes

    assert world_sizes(load_task("30")) == tuple(range(1, 73))  # no constraint
    assert world_sizes(load_task("29"), "mixtral-ep8") == (1, 2, 4, 8)  # num_experts % W == 0
    assert world_sizes(load_task("29"), upto=8) == (1, 2, 4, 8)


def test_tasks_show_says_which_world_sizes_apply(cli) -> None:
    """Task 30 has no constraint: no empty table, a line saying any W (issue 30)."""
    out = cli("tasks", "show", "30").out
    assert "constraint on W" not in out
    assert "World size: any W from 1 to 72 at preset pkb (no constraint in the task file); " \
           "default 8" in out
    constrained = cli("tasks", "show", "29").out
    assert "constraint on W" in constrained and "num_experts % W == 0" in constrained
    assert "World sizes from 1 to 72 at preset pkb: 1-2, 4, 8; default 8" in constrained
