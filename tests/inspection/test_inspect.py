"""Static inspection of PKB-format solutions (pkbsim.inspection.solution, inspect_cmd)."""

from __future__ import annotations

import dataclasses
import json
import shutil
import textwrap
from pathlib import Path

import pytest
from paths import DATA

from pkbsim.cli.inspect import inspect_command
from pkbsim.errors import PkbsimError, UsageError
from pkbsim.inspection.solution import InspectError, Inspection, inspect_path, inspect_source
from pkbsim.inspection.vocab import FLAGS, MECHANISMS
from pkbsim.report.inspect_report import SCHEMA

SOLUTIONS = DATA / "solutions"

# file -> (mechanisms, nccl_on_hot_path, custom_kernels, flags set, evidence name -> lines)
EXPECTED: dict[str, tuple[list[str], list[str], int, set[str], dict[str, list[int]]]] = {
    "nccl_allreduce.py": (["nccl_payload"], ["all_reduce"], 0, set(),
                          {"nccl_on_hot_path": [11], "nccl_payload": [11]}),
    "copy_engine_copy.py": (["copy_engine"], [], 0, set(), {"copy_engine": [22]}),
    "copy_engine_memcpy.py": (["copy_engine"], [], 0, set(), {"copy_engine": [9]}),
    "symm_peer_kernel.py": (["sm_peer_ldst"], [], 1, {"device_barrier"},
                            {"custom_kernels": [10], "device_barrier": [42],
                             "sm_peer_ldst": [13, 44]}),
    "tma_bulk.py": (["tma"], [], 1, set(), {"custom_kernels": [6], "tma": [9]}),
    "multimem.py": (["nvls_multimem"], [], 1, set(),
                    {"custom_kernels": [6], "nvls_multimem": [10, 12]}),
    "nvshmem_put.py": (["nvshmem"], [], 1, {"device_barrier"},
                       {"custom_kernels": [7], "device_barrier": [11], "nvshmem": [9, 11]}),
    "tk_pgl.py": (["tk_pgl"], [], 1, set(),
                  {"custom_kernels": [25], "tk_pgl": [10, 21, 22, 23, 33]}),
    # x.numel() < 1 << 16 is false for PKB's 1024 x 1024 inputs: the one-shot branch is a fallback
    "symm_ops.py": (["nvls_multimem"], [], 0, set(), {"nvls_multimem": [18]}),
    "host_barrier.py": ([], ["all_gather_object (metadata)", "barrier (metadata)"], 0,
                        {"host_barrier_per_call"},
                        {"host_barrier_per_call": [7, 13], "nccl_on_hot_path": [7, 13]}),
    "host_sync.py": ([], [], 0, {"host_sync"}, {"host_sync": [11, 12, 13]}),
    "per_call_rendezvous.py": (["sm_peer_ldst"], [], 0,
                               {"device_barrier", "per_call_rendezvous", "one_shot"},
                               {"device_barrier": [10], "one_shot": [12, 14],
                                "per_call_rendezvous": [7, 8], "sm_peer_ldst": [14]}),
    "metadata_broadcast.py": (["nccl_payload"],
                              ["broadcast (metadata)", "all_reduce (metadata)", "broadcast"], 0,
                              set(), {"nccl_on_hot_path": [7, 8, 10], "nccl_payload": [10]}),
    "fused_triton.py": (["sm_peer_ldst"], [], 1, {"fused_comm_compute"},
                        {"custom_kernels": [12], "fused_comm_compute": [16, 21],
                         "sm_peer_ldst": [16, 17]}),
    "fused_cuda.py": (["sm_peer_ldst"], [], 1, {"device_barrier", "fused_comm_compute"},
                      {"custom_kernels": [11], "device_barrier": [8, 15],
                       "fused_comm_compute": [14], "sm_peer_ldst": [14]}),
    "streams_chunks.py": (["nccl_payload"], ["all_reduce"], 0, {"overlap_attempt"},
                          {"nccl_on_hot_path": [16], "nccl_payload": [16],
                           "overlap_attempt": [10, 12, 14, 15, 16]}),
    "one_shot_cuda.py": (["sm_peer_ldst"], [], 1, {"one_shot"},
                         {"custom_kernels": [5], "one_shot": [8, 9], "sm_peer_ldst": [9]}),
    "two_shot_cuda.py": (["sm_peer_ldst"], [], 1, set(),
                         {"custom_kernels": [5], "sm_peer_ldst": [10, 13]}),
    "one_shot_triton.py": (["sm_peer_ldst"], [], 1, {"device_barrier", "one_shot"},
                           {"custom_kernels": [8], "device_barrier": [10], "one_shot": [15, 17],
                            "sm_peer_ldst": [16, 17, 24]}),
    "capped_grid.py": ([], [], 3, {"grid_capped"},
                       {"custom_kernels": [8, 12, 25], "grid_capped": [16, 17, 35, 36]}),
    "uncoalesced.py": (["sm_peer_ldst"], [], 3, {"uncoalesced_peer"},
                       {"custom_kernels": [6, 10, 14], "sm_peer_ldst": [8, 12],
                        "uncoalesced_peer": [8, 12]}),
    "uncoalesced_triton.py": (["sm_peer_ldst"], [], 1, {"uncoalesced_peer"},
                              {"custom_kernels": [7], "sm_peer_ldst": [10, 11],
                               "uncoalesced_peer": [10]}),
    "negative_mentions.py": ([], [], 1, set(), {"custom_kernels": [14]}),
    # the size rule (issue 32): tests/inspection/test_sizes.py reads each site's bound
    "metadata_sizes.py": (["nccl_payload"],
                          ["all_reduce (metadata)", "all_gather_into_tensor (metadata)",
                           "all_to_all_single (metadata)", "all_reduce"], 0, {"host_sync"},
                          {"host_sync": [53],
                           "nccl_on_hot_path": [14, 20, 24, 25, 26, 28, 29, 32, 33, 34, 37, 38,
                                                39, 42, 46, *range(48, 56)],
                           "nccl_payload": list(range(48, 56))}),
    # copies inside C++ (issue 32); the IPC open counts as SM peer access, as everywhere
    "copy_engine_cpp.py": (["copy_engine", "sm_peer_ldst"], [], 0, set(),
                           {"copy_engine": [15, 21, 30, 50], "sm_peer_ldst": [49]}),
}


def lines(found: Inspection) -> dict[str, list[int]]:
    return {name: [line for line, _ in items] for name, items in found.evidence.items()}


def only(source: str) -> Inspection:
    return inspect_source(textwrap.dedent(source), "inline.py")


def test_every_fixture_has_expectations() -> None:
    assert sorted(p.name for p in SOLUTIONS.glob("*.py")) == sorted(EXPECTED)


def test_fields_follow_the_vocabulary() -> None:
    names = [f.name for f in dataclasses.fields(Inspection)]
    assert [n for n in names if n in FLAGS] == list(FLAGS)
    assert list(Inspection(file="x").flags) == list(FLAGS)
    covered = {m for exp in EXPECTED.values() for m in exp[0]}
    assert covered == set(MECHANISMS)  # every mechanism has a fixture
    assert {f for exp in EXPECTED.values() for f in exp[3]} == set(FLAGS)  # and every flag


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture(name: str) -> None:
    mechanisms, nccl, kernels, flags, evidence = EXPECTED[name]
    [found] = inspect_path(SOLUTIONS / name)
    assert list(found.mechanisms) == mechanisms
    assert list(found.nccl_on_hot_path) == nccl
    assert found.custom_kernels == kernels
    assert {f for f, on in found.flags.items() if on} == flags
    assert lines(found) == evidence
    assert found.error is None and found.notes == ()


def test_evidence_snippets_are_the_source_lines() -> None:
    [found] = inspect_path(SOLUTIONS / "multimem.py")
    source = (SOLUTIONS / "multimem.py").read_text().splitlines()
    for line, text in found.evidence["nvls_multimem"]:
        assert text == source[line - 1].strip()[:120]
        assert text.startswith('asm volatile("multimem.')


# --- mentions are not uses ---------------------------------------------------------------------

KERNEL = '''
import torch
SRC = r"""
__global__ void k(float* x) {{
    {body}
}}
"""
def solution(x):
    return x
'''


@pytest.mark.parametrize("body, used", [
    ('asm volatile("multimem.ld_reduce.relaxed.sys.global.add.f32 %0, [%1];" : "=f"(x[0]) '
     ': "l"(x));', True),
    ("// multimem.ld_reduce.relaxed.sys.global.add.f32", False),
    ("/* multimem.st.relaxed.sys.global.f32 */ x[0] = 1.f;", False),
    ('printf("multimem.ld_reduce is not available\\n");', False),
    ("x[0] = 1.f;  // then multimem.st", False),
])
def test_multimem_in_cuda_source(body: str, used: bool) -> None:
    found = only(KERNEL.format(body=body))
    assert ("nvls_multimem" in found.mechanisms) is used
    assert ("nvls_multimem" in found.evidence) is used
    assert found.custom_kernels == 1


@pytest.mark.parametrize("code, used", [
    ("# multimem.ld_reduce.relaxed.sys.global.add.f32", False),
    ('MSG = "multimem.ld_reduce.relaxed.sys.global.add.f32"', False),
    ('"""multimem.ld_reduce.relaxed.sys.global.add.f32"""', False),
    ('y = tl.inline_asm_elementwise("multimem.ld_reduce.relaxed.sys.global.add.f32 $0, [$1];", '
     '"=r,l", [x], dtype=tl.float32, is_pure=False, pack=1)', True),
])
def test_multimem_in_python(code: str, used: bool) -> None:
    found = only(f"import triton.language as tl\n\ndef solution(x):\n    {code}\n    return x\n")
    assert ("nvls_multimem" in found.mechanisms) is used


def test_triton_inline_multimem_with_math_is_fused() -> None:
    found = only("""
        import triton
        import triton.language as tl
        @triton.jit
        def norm_allreduce(mc_ptr, out_ptr, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            x = tl.inline_asm_elementwise(
                "multimem.ld_reduce.relaxed.sys.global.add.f32 $0, [$1];",
                "=r,l", [mc_ptr + offs], dtype=tl.float32, is_pure=False, pack=1)
            tl.store(out_ptr + offs, x * tl.rsqrt(tl.sum(x * x, 0)))
        def solution(x, mc):
            norm_allreduce[(x.numel() // 1024,)](mc, x, BLOCK=1024)
            return x
        """)
    assert lines(found) == {"custom_kernels": [5], "nvls_multimem": [8],
                            "fused_comm_compute": [8, 10]}


def test_metadata_queries_are_not_listed() -> None:
    found = only("""
        import torch.distributed as dist
        def solution(x):
            if dist.is_initialized() and dist.get_rank() < dist.get_world_size():
                g = dist.get_global_rank(dist.group.WORLD, 0)
            return x
        """)
    assert found.nccl_on_hot_path == () and found.mechanisms == ()
    assert found.evidence == {}


def test_import_forms_resolve() -> None:
    found = only("""
        import torch
        from torch.distributed import all_reduce as ar
        from torch import distributed as d
        def solution(x, out):
            ar(x)
            torch.distributed.all_gather_into_tensor(out, x)
            d.reduce_scatter_tensor(x, out)
            return x
        """)
    assert found.nccl_on_hot_path == ("all_reduce", "all_gather_into_tensor",
                                      "reduce_scatter_tensor")
    assert lines(found)["nccl_payload"] == [6, 7, 8]


# --- what runs per call ------------------------------------------------------------------------

@pytest.mark.parametrize("setup, per_call", [
    ("    h = symm_mem.rendezvous(buf, 'g')\n", True),
    ("    global _h\n    if _h is None:\n        _h = symm_mem.rendezvous(buf, 'g')\n", False),
    ("    global _h\n    if _h is not None:\n        return x\n"
     "    _h = symm_mem.rendezvous(buf, 'g')\n", False),
    ("    c = _cache.get(1)\n    if c is None:\n"
     "        _cache[1] = symm_mem.rendezvous(buf, 'g')\n", False),
    ("    if dist.get_rank() == 0:\n        h = symm_mem.rendezvous(buf, 'g')\n", True),
    ("    if 1 not in _cache:\n        _cache[1] = symm_mem.rendezvous(buf, 'g')\n", False),
    ("    if 1 in _cache:\n        h = _cache[1]\n    else:\n"
     "        h = symm_mem.rendezvous(buf, 'g')\n", False),
    ("    h = _make(buf)\n", True),
    ("    h = _cached(buf)\n", False),
])
def test_per_call_rendezvous(setup: str, per_call: bool) -> None:
    source = ("import functools\nimport torch.distributed as dist\n"
              "import torch.distributed._symmetric_memory as symm_mem\n"
              "_h = None\n_cache = {}\n\n"
              "def _make(buf):\n    return symm_mem.rendezvous(buf, 'g')\n\n"
              "@functools.lru_cache\ndef _cached(buf):\n"
              "    return symm_mem.rendezvous(buf, 'g')\n\n"
              f"def solution(x, buf):\n{setup}    return x\n")
    assert inspect_source(source, "inline.py").per_call_rendezvous is per_call


def test_methods_and_autograd_functions_are_followed() -> None:
    found = only("""
        import torch
        import torch.distributed as dist
        import torch.distributed._symmetric_memory as symm_mem
        class _A2A(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                out = torch.empty_like(x)
                dist.all_to_all_single(out, x)
                return out
        class Runner:
            def __init__(self):
                self.hdl = None
            def run(self, x):
                if self.hdl is None:
                    self.hdl = symm_mem.rendezvous(x, "g")
                torch.cuda.synchronize()
                return _A2A.apply(x)
        _runner = Runner()
        def solution(x):
            return _runner.run(x)
        """)
    assert found.nccl_on_hot_path == ("all_to_all_single",)
    assert lines(found) == {"nccl_on_hot_path": [9], "nccl_payload": [9], "host_sync": [17]}


@pytest.mark.parametrize("loop, overlap", [
    ("    parts = [p.contiguous() for p in x.chunk(4)]\n    dist.all_to_all(parts, parts)\n",
     False),
    ("    for c in x.chunk(4):\n        c.mul_(2)\n", False),
    ("    for c in x.chunk(4):\n        dist.all_reduce(c)\n", True),
    ("    for i in range(num_chunks):\n        _send(x, i)\n", True),
    ("    for c in x.split(1024):\n        _ext.push(c)\n", True),
    ("    for c in x.split(1024):\n        _get_ext().push(c)\n", True),
])
def test_chunk_loops_count_when_they_communicate(loop: str, overlap: bool) -> None:
    source = ("import torch.distributed as dist\n"
              "from torch.utils.cpp_extension import load_inline\n"
              "num_chunks = 4\n_ext = load_inline('e', cpp_sources='', cuda_sources='')\n"
              "def _get_ext():\n    return load_inline('e', cpp_sources='', cuda_sources='')\n"
              "def _send(x, i):\n    dist.send(x[i], 1)\n"
              f"def solution(x):\n{loop}    return x\n")
    assert inspect_source(source, "inline.py").overlap_attempt is overlap


def test_nccl_off_the_hot_path_is_not_listed() -> None:
    found = only("""
        import torch.distributed as dist
        _ready = []
        dist.all_reduce(WARMUP)
        def unused(x):
            dist.all_reduce(x)
        def _init(x):
            if not _ready:
                dist.barrier()
                _ready.append(True)
        def solution(x):
            _init(x)
            return x
        """)
    assert found.nccl_on_hot_path == ()
    assert not found.host_barrier_per_call and found.mechanisms == ()


def test_without_solution_every_function_is_per_call() -> None:
    found = only("""
        import torch.distributed as dist
        def helper(x):
            dist.barrier()
        """)
    assert found.host_barrier_per_call
    assert found.notes == ("no solution() found: every function counts as per call",)


def test_cupy_launch_grid_and_kernels() -> None:
    found = only('''
        import cupy as cp
        _k = cp.RawKernel(r"""
        extern "C" __global__ void scale(float* x) { x[threadIdx.x] *= 2.f; }
        """, "scale")
        _add = cp.ElementwiseKernel("float32 x", "float32 y", "y = x + 1", "add_one")
        def solution(x):
            _k((8,), (256,), (x,))
            _k((x.size // 256,), (256,), (x,))
            return _add(x)
        ''')
    assert found.custom_kernels == 2
    assert lines(found)["grid_capped"] == [8]


def test_cuda_host_sync_outside_setup_functions() -> None:
    found = only('''
        SRC = r"""
        #include <cuda_runtime.h>
        void init_handles(int64_t* ptrs) {
            cudaDeviceSynchronize();
        }
        void run(cudaStream_t s) {
            if (s) {
                cudaStreamSynchronize(s);
            }
        }
        """
        def solution(x):
            return x
        ''')
    assert lines(found) == {"host_sync": [9]}


# --- errors and folders ------------------------------------------------------------------------

def test_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def solution(x):\n    return (x\n")
    with pytest.raises(InspectError) as err:
        inspect_path(bad)
    message = err.value.one_line()
    assert str(bad) in message and "line 2" in message and "syntax error" in message


def test_missing_and_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(InspectError, match="no such file"):
        inspect_path(tmp_path / "nope.py")
    binary = tmp_path / "binary.py"
    binary.write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(InspectError, match="cannot read"):
        inspect_path(binary)
    (tmp_path / "empty").mkdir()
    with pytest.raises(InspectError, match=r"no \*\.py files"):
        inspect_path(tmp_path / "empty")


def test_folder_keeps_going_past_a_bad_file(tmp_path: Path) -> None:
    shutil.copy(SOLUTIONS / "nccl_allreduce.py", tmp_path / "b.py")
    (tmp_path / "sub").mkdir()
    shutil.copy(SOLUTIONS / "multimem.py", tmp_path / "sub" / "c.py")
    (tmp_path / "a.py").write_text("def solution(:\n")
    (tmp_path / "notes.txt").write_text("not python")
    rows = inspect_path(tmp_path)
    assert [Path(r.file).relative_to(tmp_path).as_posix() for r in rows] == [
        "a.py", "b.py", "sub/c.py"]
    assert rows[0].error is not None and "line 1" in rows[0].error
    assert rows[1].mechanisms == ("nccl_payload",) and rows[2].mechanisms == ("nvls_multimem",)


# --- the command -------------------------------------------------------------------------------

def test_command_table(capsys: pytest.CaptureFixture[str]) -> None:
    inspect_command([SOLUTIONS], "table", None)
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("one_shot_cuda.py "))
    assert "sm_peer_ldst" in row and "one_shot" in row and row.split("│")[3].strip() == "1"
    assert "  one_shot_cuda.py: custom_kernels: 5; one_shot: 8, 9; sm_peer_ldst: 9" in out


def test_command_table_one_file_shows_snippets(capsys: pytest.CaptureFixture[str]) -> None:
    inspect_command([SOLUTIONS / "host_barrier.py"], "table", None)
    out = capsys.readouterr().out
    assert "host_barrier_per_call  line   13: dist.barrier()" in out


def test_command_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "inspect.json"
    inspect_command([SOLUTIONS / "host_barrier.py", SOLUTIONS / "fused_cuda.py"], "json", out)
    assert capsys.readouterr().out == ""
    data = json.loads(out.read_text())
    assert data["schema"] == SCHEMA == "pkbsim.inspect/1"
    first, second = data["files"]
    assert first["file"].endswith("host_barrier.py")
    assert first["nccl_on_hot_path"] == ["all_gather_object (metadata)", "barrier (metadata)"]
    assert first["evidence"]["host_barrier_per_call"] == [
        [7, "dist.all_gather_object(sizes, 1)"], [13, "dist.barrier()"]]
    assert {k: second[k] for k in FLAGS if second[k]} == {"device_barrier": True,
                                                          "fused_comm_compute": True}
    assert second["mechanisms"] == ["sm_peer_ldst"] and second["custom_kernels"] == 1
    assert second["error"] is None and first["notes"] == []


def test_command_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(PkbsimError) as missing:
        inspect_command([tmp_path / "nope.py"], "table", None)
    assert missing.value.one_line() == f"{tmp_path / 'nope.py'}: no such file"
    with pytest.raises(UsageError, match="--format csv"):
        inspect_command([SOLUTIONS], "csv", None)
    bad = tmp_path / "bad.py"
    bad.write_text("x = (\n")
    with pytest.raises(PkbsimError) as err:
        inspect_command([bad], "json", None)
    assert "bad.py" in err.value.one_line() and "line 1" in err.value.one_line()
    shutil.copy(SOLUTIONS / "tma_bulk.py", tmp_path / "good.py")
    inspect_command([tmp_path], "json", None)
    captured = capsys.readouterr()
    files = json.loads(captured.out)["files"]
    assert [f["error"] is None for f in files] == [False, True]
    assert captured.err.startswith("1 of 2 file(s) could not be inspected: ")
    assert captured.err.count("\n") == 1


def test_cli_inspect_end_to_end(cli, tmp_path: Path) -> None:
    """`pkbsim inspect DIR --format json --out FILE` through the real entry point; a missing
    path is one stderr line and exit 2."""
    out = tmp_path / "inspect.json"
    folder = DATA / "solutions"
    result = cli("inspect", str(folder), "--format", "json", "--out", str(out))
    assert result.code == 0, result.err
    data = json.loads(out.read_text())
    assert data["schema"] == "pkbsim.inspect/1"
    rows = {Path(f["file"]).name: f for f in data["files"]}
    assert rows["nccl_allreduce.py"]["mechanisms"] == ["nccl_payload"]
    assert rows["multimem.py"]["mechanisms"] == ["nvls_multimem"]
    assert rows["negative_mentions.py"]["mechanisms"] == []
    bad = cli("inspect", str(tmp_path / "missing.py"))
    assert bad.code == 2 and len(bad.err.strip().splitlines()) == 1
