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



def test_what_pkbsim_writes_as_yaml_it_reads_back(tmp_path: Path) -> None:
    from pkbsim.errors import TopologyError
    from pkbsim.fields import load_yaml, yaml_text

    shared = {"efficiency": 0.9}  # one object used twice: safe_dump wrote &id001 / *id001
    path = tmp_path / "t.yaml"
    path.write_text(yaml_text({"a": shared, "b": shared}))
    assert "&" not in path.read_text()
    assert load_yaml(path, TopologyError)[0] == {"a": shared, "b": shared}

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


# ---------------------------------------------------------------- simulation work

def _many_ops(tmp_path: Path, n: int) -> Path:
    """A task of ``n`` all-reduces of distinct sizes, under every size limit of the file."""
    ops = "".join(f"  - id: ar{i}\n    kind: all_reduce\n    elements_per_rank: \"M * N + {i}\"\n"
                  f"    dtype: bf16\n    reduce_op: sum\n" for i in range(n))
    head = (ROOT / "tasks" / "13_gemm_allreduce.yaml").read_text().split("\nops:")[0]
    path = tmp_path / "many_ops.yaml"
    path.write_text(head.replace("\naliases: [gemm_ar]", "") + "\nops:\n" + ops)
    return path


@pytest.mark.timeout(60)
@pytest.mark.parametrize("command", [["analyze"], ["simulate", "--strategy", "custom_best"]])
def test_custom_best_calls_alone_are_counted_up_front(cli, tmp_path: Path,
                                                      command: list[str]) -> None:
    path = _many_ops(tmp_path, 2_600)  # 4 candidates each: 10,400 calls alone per run
    start = time.perf_counter()
    one_line(cli(*command, "--task", str(path)), "10,400 is over the limit of 10,000 "
             "collective calls custom_best simulates alone", "PKBSIM_MAX_SIM_CALLS")
    assert time.perf_counter() - start < 5  # before: over 400 s for 1,000 such ops


def test_every_run_custom_best_tries_counts_its_calls(cli, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PKBSIM_MAX_SIM_CALLS", "12")  # 3 ops x 4: the first run only
    one_line(cli("simulate", "--task", str(_many_ops(tmp_path, 3)), "--strategy", "custom_best"),
             "2 piece counts tried: 24 is over the limit of 12", "PKBSIM_MAX_SIM_CALLS")


def test_calls_alone_draw_on_the_transfer_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    from pkbsim.errors import InfeasibleError
    from pkbsim.placement import fabric_for
    from pkbsim.sim import Strategy, simulate
    from pkbsim.sim.network import Network
    from pkbsim.task.loader import instantiate, load_task
    from pkbsim.topology.loader import load_topology

    networks: list[Network] = []
    init = Network.__init__

    def spy(self: Network, *args: Any) -> None:
        init(self, *args)
        networks.append(self)

    monkeypatch.setattr(Network, "__init__", spy)
    inst, topo = instantiate(load_task("13"), None, "pkb", {}), load_topology("dgx-h100")
    strategy = Strategy("custom_best", chunks=1)  # one run, and the calls it makes alone
    simulate(inst, topo, strategy)
    largest = max(n.flows_started for n in networks)
    assert len(networks) > 1 and sum(n.flows_started for n in networks) > largest
    fabric_for(topo).call_times.clear()  # simulate the calls alone again
    monkeypatch.setenv("PKBSIM_MAX_SIM_FLOWS", str(largest))  # each simulation alone fits
    with pytest.raises(InfeasibleError, match="PKBSIM_MAX_SIM_FLOWS"):
        simulate(inst, topo, strategy)


def test_the_ops_of_a_task_are_bounded(cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PKBSIM_MAX_TASK_OPS", "2")
    one_line(cli("analyze", "--task", str(GRPO), "--no-predict"), f"{GRPO}: ops: ",
             "limit of 2 ops in one task", "PKBSIM_MAX_TASK_OPS")
