"""Inputs under every size limit that still cost unbounded time (issue 30): a YAML alias bomb,
base-60 numbers, inspection that grows with the square of its input, folders without end, a
task whose per-op simulations escaped the work limits, a Dask scheduler that is not one."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from paths import ROOT

GRPO = ROOT / "tasks" / "83_vocab_parallel_log_prob_topk_chunked.yaml"
H100 = ROOT / "topologies" / "dgx-h100.yaml"


def one_line(r: Any, *needles: str) -> None:
    assert r.code == 2, (r.code, r.out[-300:], r.err[-300:])
    assert r.err.count("\n") == 1 and r.err.startswith("pkbsim: error: "), r.err
    for needle in needles:
        assert needle in r.err, r.err


def _alias_bomb(levels: int = 9, width: int = 9) -> str:
    """``levels`` lists of ``width`` aliases of the list before: width**levels values."""
    lines = ["a0: &a0 [" + ", ".join(["x"] * width) + "]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]"
              for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- YAML

@pytest.mark.timeout(30)
@pytest.mark.parametrize("kind", ["task", "topology"])
def test_a_yaml_alias_bomb_is_refused_at_once(cli, tmp_path: Path, kind: str) -> None:
    base = GRPO if kind == "task" else H100
    path = tmp_path / "bomb.yaml"
    path.write_text(base.read_text() + _alias_bomb())
    option = ["--task", str(path)] if kind == "task" else ["-t", "grpo", "--topology", str(path)]
    start = time.perf_counter()
    r = cli("analyze", *option, "--no-predict")
    one_line(r, str(path), "a1[0]", "anchor at line", "aliases")
    assert time.perf_counter() - start < 5


@pytest.mark.parametrize("text", [
    "x: &a 1\ny: *a\n",  # one alias, however small
    "base: &b {k: 1}\nother:\n  <<: *b\n",  # a merge key is an alias too
    "a: &a [*a]\n",  # an alias of itself
])
def test_every_yaml_alias_is_refused(cli, tmp_path: Path, text: str) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(GRPO.read_text() + text)
    one_line(cli("analyze", "--task", str(path), "--no-predict"), str(path),
             "anchors and aliases")


@pytest.mark.parametrize(("old", "new", "field"), [
    ("M: {value: 1024", "M: {value: 1:30", "params.M.value"),
    ("M: {value: 1024", "M: {value: 1:30.5", "params.M.value"),
    ("M: {value: 1024", "M: {value: -2:00:00", "params.M.value"),
    ("\ntitle: ", "\ntitle: 1:30 #", "title"),
])
def test_base_60_numbers_are_refused_with_their_field(cli, tmp_path: Path, old: str, new: str,
                                                      field: str) -> None:
    path = tmp_path / "t.yaml"
    text = GRPO.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    one_line(cli("analyze", "--task", str(path), "--no-predict"), f"{path}: {field}: ",
             "base-60")


def test_quoted_base_60_text_is_text(cli, tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(GRPO.read_text().replace("\ntitle: ", "\ntitle: '1:30' #", 1))
    r = cli("analyze", "--task", str(path), "--no-predict")
    assert r.code == 0, r.err
    assert "1:30" in r.out
