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


# ---------------------------------------------------------------- inspect

_HOSTILE_SOURCES = {  # (n, device source of n parts): each cost the square of n before
    "bare __global__": (8000, lambda n: "__global__\n" * n),
    "unclosed kernels": (4000, lambda n: "__global__ void k(int a) {\n" * n),
    "unclosed parameters": (4000, lambda n: "__global__ void k(\n" * n),
    "peer parameters": (4000, lambda n: "__global__ void k(" + ", ".join(
        f"float* peer{i}" for i in range(n)) + ") {\n" + "".join(
        f"peer{i}[0] = 1;\n" for i in range(n)) + "}\n"),
    "launch sizes": (4000, lambda n: "__global__ void k() {}\n" + "".join(
        f"k<<<B{i}, 1>>>(p);\nint B{i} = 4;\n" for i in range(n))),
    "peer copies": (4000, lambda n: "__global__ void k() {}\n" + "".join(
        f"void f{i}(float* peer) {{ cudaMemcpyAsync(peer, x, 8, s); }}\n" for i in range(n))),
    "nested loops": (4000, lambda n: "__global__ void k(float** peers) {\n"
                     + "for (int r = 0; r < world_size; r++) {\n" * n),
    "unclosed launches": (16000, lambda n: "__global__ void k() {}\n" + "k<<<1, 2\n" * n),
    "asm": (16000, lambda n: "__global__ void k() {\n" + 'asm volatile("nop;");\n' * n + "}\n"),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", sorted(_HOSTILE_SOURCES))
def test_inspection_is_linear_in_device_source(kind: str) -> None:
    from pkbsim.inspection import inspect_source

    n, make = _HOSTILE_SOURCES[kind]
    source = f'SRC = r"""\n{make(n)}"""\ndef solution(x):\n    return x\n'
    start = time.perf_counter()
    inspect_source(source, "hostile.py")
    assert time.perf_counter() - start < 5  # 0.1-0.6 s now; 16 s to over 60 s before


def test_inspect_refuses_a_folder_of_too_many_files_up_front(cli, tmp_path: Path) -> None:
    for i in range(10_001):  # the default limit of 10,000 solution files, plus one
        (tmp_path / f"s{i}.py").write_text("def solution(x):\n    return x\n")
    start = time.perf_counter()
    one_line(cli("inspect", str(tmp_path)), str(tmp_path), "10,000 solution files",
             "PKBSIM_MAX_SOURCE_FILES")
    assert time.perf_counter() - start < 5  # before: every file inspected, about 7 s


def test_inspect_bounds_the_entries_it_walks(cli, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a.py").write_text("def solution(x):\n    return x\n")
    for i in range(30):  # not solution files, but each is looked at
        (tmp_path / "deep" / str(i)).mkdir(parents=True)
    monkeypatch.setenv("PKBSIM_MAX_WALK_ENTRIES", "20")
    one_line(cli("inspect", str(tmp_path)), str(tmp_path), "limit of 20 files and folders",
             "PKBSIM_MAX_WALK_ENTRIES")
    monkeypatch.setenv("PKBSIM_MAX_WALK_ENTRIES", "40")
    assert cli("inspect", str(tmp_path)).code == 0


def test_inspect_bounds_the_bytes_of_all_files(cli, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    files = []
    for i in range(3):
        files.append(tmp_path / f"s{i}.py")
        files[-1].write_text("def solution(x):\n    return x\n" + "# pad\n" * 150)
    monkeypatch.setenv("PKBSIM_MAX_SOURCE_TOTAL_BYTES", "2048")
    one_line(cli("inspect", str(tmp_path)), "limit of 2,048 bytes of solution files",
             "PKBSIM_MAX_SOURCE_TOTAL_BYTES")
    one_line(cli("inspect", *map(str, files)), str(files[2]), "PKBSIM_MAX_SOURCE_TOTAL_BYTES")
    assert cli("inspect", *map(str, files[:2])).code == 0
