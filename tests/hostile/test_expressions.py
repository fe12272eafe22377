"""Task expressions too long or too deep to recurse over (a 50,000-term sum, 5,000 chained
conditionals) are one line naming the file and the field, never a RecursionError or a
MemoryError; expressions at the bounds still work."""

from __future__ import annotations

import sys
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
import yaml
from paths import ROOT

from pkbsim import expr
from pkbsim.errors import ExpressionError

GRPO = ROOT / "tasks" / "83_vocab_parallel_log_prob_topk_chunked.yaml"


def task_with(tmp_path: Path, edit: Any) -> Path:
    data = yaml.safe_load(GRPO.read_text())
    edit(data)
    path = tmp_path / "deep.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False, width=10**9))
    return path


def repeat(text: str) -> Any:
    return lambda d: d["ops"][0].update(repeat=text)


def constraint(text: str) -> Any:
    return lambda d: d["world_size"]["constraints"][0].update(check=text)


@pytest.mark.parametrize(("edit", "field", "needle"), [
    (repeat(" + ".join(["1"] * 50_000)), "ops[0].repeat", "longer than 2,000 characters"),
    (repeat("1" + " if W > 0 else 1" * 5_000), "ops[0].repeat", "longer than 2,000"),
    (repeat("-" * 5_000 + "1"), "ops[0].repeat", "longer than 2,000"),
    (repeat("+".join(["1"] * 900)), "ops[0].repeat", "nests deeper than 100 levels"),
    (repeat("-" * 1_999 + "1"), "ops[0].repeat", "nests deeper than 100 levels"),
    (repeat("1" + " if W else 1" * 150), "ops[0].repeat", "nests deeper than 100 levels"),
    (lambda d: d["derived"].update(deep="+".join(["W"] * 900)), "derived.deep", "nests deeper"),
    (constraint("+".join(["W"] * 900)), "world_size.constraints[0].check", "nests deeper"),
    (constraint("W +"), "world_size.constraints[0].check", "cannot parse expression 'W +'"),
])
def test_deep_expressions_are_one_line(cli, tmp_path: Path, edit: Any, field: str,
                                       needle: str) -> None:
    path = task_with(tmp_path, edit)
    r = cli("analyze", "--task", str(path), "--no-predict")
    assert r.code == 2, (r.code, r.err[-500:])
    assert r.err.count("\n") == 1 and len(r.err) < 400, r.err[:600]
    assert r.err.startswith(f"pkbsim: error: {path}: {field}: "), r.err
    assert needle in r.err


def nested_sum(levels: int) -> str:
    """``1+(1+(1+...))``: one sub-expression deeper per level."""
    return "1+(" * (levels - 1) + "1" + ")" * (levels - 1)


def test_the_bounds_themselves_are_accepted() -> None:
    at_limit = nested_sum(expr.MAX_DEPTH // 2)  # each level is a BinOp and its operand
    assert expr.depth(expr.parse(at_limit)) <= expr.MAX_DEPTH
    assert expr.evaluate(at_limit, {}) == expr.MAX_DEPTH // 2
    flat = "+".join(["W"] * 50)  # 50 terms, 50 levels (a sum nests to the left)
    assert expr.evaluate(flat, {"W": 2}) == 100
    long_flat = "max(" + ",".join(["W"] * ((expr.MAX_CHARS - 5) // 2)) + ")"
    assert len(long_flat) <= expr.MAX_CHARS and expr.evaluate(long_flat, {"W": 3}) == 3


def test_refused_deep_inside_a_deep_stack() -> None:
    """The parser's own recursion is caught too: parsed near Python's recursion limit."""
    text = "-" * 1_500 + "1"

    def descend(n: int) -> None:
        if n:
            descend(n - 1)
            return
        with pytest.raises(ExpressionError, match="nests deeper"):
            expr.parse(text)

    frame: FrameType | None = sys._getframe()
    used = 0
    while frame is not None:
        frame, used = frame.f_back, used + 1
    descend(sys.getrecursionlimit() - used - 30)
