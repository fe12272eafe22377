"""Path-sensitive inspection: each data-moving call placed hot, setup, fallback or unknown
under the profile, with the condition that decides it; copy-engine routes; the CLI options."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from pkbsim.inspection import inspect_source
from pkbsim.inspection.profile import Profile

HEAD = """\
import os, functools, ctypes
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
"""


def sites(body: str, profile: Profile | None = None) -> dict[tuple[int, str], tuple[str, str]]:
    """(line in ``body``, kind) -> (path, condition)."""
    code = HEAD + textwrap.dedent(body)
    row = inspect_source(code, "case.py", profile or Profile())
    offset = HEAD.count("\n")
    return {(s.line - offset, s.kind): (s.path, s.condition) for s in row.call_sites}


def path_at(body: str, line: int, kind: str = "nccl_payload", **profile: object) -> str:
    return sites(body, Profile(**profile))[(line, kind)][0]  # type: ignore[arg-type]


DTYPE_ELIF = """\
def solution(x):
    if x.dtype == torch.bfloat16:
        return x * 2
    elif x.dtype == torch.float32:
        return x * 3
    else:
        dist.all_reduce(x)
        return x
"""


@pytest.mark.parametrize(("dtype", "expected"), [("bfloat16", "fallback"),
                                                 ("float32", "fallback"),
                                                 ("float16", "hot")])
def test_dtype_branches_follow_the_profile(dtype: str, expected: str) -> None:
    assert path_at(DTYPE_ELIF, 7, dtype=dtype) == expected


def test_the_condition_is_the_evidence() -> None:
    path, why = sites(DTYPE_ELIF)[(7, "nccl_payload")]
    assert path == "fallback"
    assert why == "else of `if x.dtype == torch.bfloat16`, true under the profile"
    _, why32 = sites(DTYPE_ELIF, Profile(dtype="float32"))[(7, "nccl_payload")]
    assert why32 == "else of `if x.dtype == torch.float32`, true under the profile"


@pytest.mark.parametrize(("body", "line", "expected"), [
    # a set of supported dtypes, early return
    ("_OK = (torch.bfloat16, torch.float16)\ndef solution(x):\n    if x.dtype not in _OK:\n"
     "        return dist.all_reduce(x)\n    return x + 1\n", 4, "fallback"),
    # except handlers never run
    ("def solution(x):\n    try:\n        return x + 1\n    except RuntimeError:\n"
     "        dist.all_reduce(x)\n        return x\n", 5, "fallback"),
    # size and alignment checks that 1024 x 1024 bfloat16 passes
    ("def solution(x):\n    if x.numel() % 8 != 0 or x.data_ptr() % 16:\n"
     "        dist.all_reduce(x)\n    return x\n", 3, "fallback"),
    ("def solution(x):\n    if x.numel() * x.element_size() < 65536:\n"
     "        dist.all_reduce(x)\n    return x\n", 3, "fallback"),
    # a world-size shortcut at W = 8, the code after it hot
    ("def solution(x):\n    ws = dist.get_world_size()\n    if ws == 1:\n        return x\n"
     "    dist.all_reduce(x)\n    return x\n", 5, "hot"),
    # CUDA is present; env flags are unset; a module constant
    ("def solution(x):\n    if not torch.cuda.is_available() or not x.is_cuda:\n"
     "        dist.all_reduce(x)\n    return x\n", 3, "fallback"),
    ("def solution(x):\n    if os.environ.get('USE_NCCL', '0') == '1':\n"
     "        dist.all_reduce(x)\n    return x\n", 3, "fallback"),
    ("USE_CUSTOM = True\ndef solution(x):\n    if not USE_CUSTOM:\n        dist.all_reduce(x)\n"
     "    return x\n", 4, "fallback"),
    # dead code
    ("def _nccl(x):\n    dist.all_reduce(x)\ndef solution(x):\n    return x\n", 2, "fallback"),
    # rank-dependent branches both run
    ("def solution(x):\n    if dist.get_rank() == 0:\n        dist.send(x, 1)\n    else:\n"
     "        dist.recv(x, 0)\n    return x\n", 3, "hot"),
    # a test on the data is undecided
    ("def solution(x):\n    if x.abs().max() > 1e4:\n        dist.all_reduce(x)\n    return x\n",
     3, "unknown"),
    # a helper's parameter takes the caller's value
    ("def _run(t, dt):\n    if dt != torch.bfloat16:\n        dist.all_reduce(t)\n    return t\n"
     "def solution(x):\n    return _run(x, x.dtype)\n", 3, "fallback"),
    # a conditional expression
    ("def solution(x):\n    return x * 2 if x.dtype == torch.bfloat16 else dist.all_reduce(x)\n",
     2, "fallback"),
    # dispatch through a dict of functions: the profile's entry is called
    ("def _fast(x):\n    return x\ndef _slow(x):\n    dist.all_reduce(x)\n    return x\n"
     "_IMPL = {torch.bfloat16: _fast}\ndef solution(x):\n    fn = _IMPL.get(x.dtype, _slow)\n"
     "    return fn(x)\n", 4, "fallback"),
    # a loop that runs no iteration at W = 1 is checked at W = 8: it runs
    ("def solution(x):\n    for p in range(1, dist.get_world_size()):\n"
     "        dist.send(x, p)\n    return x\n", 3, "hot"),
])
def test_paths(body: str, line: int, expected: str) -> None:
    kinds = {k: v for (ln, k), v in sites(body).items() if ln == line}
    assert [p for p, _ in kinds.values()] == [expected], kinds


@pytest.mark.parametrize(("body", "line", "kind"), [
    ("_h = None\ndef solution(x):\n    global _h\n    if _h is None:\n"
     "        _h = symm_mem.rendezvous(x, dist.group.WORLD.group_name)\n    return x\n",
     5, "rendezvous"),
    ("_c = {}\ndef solution(x):\n    k = x.shape\n    if k in _c:\n        return _c[k]\n"
     "    dist.barrier()\n    _c[k] = x\n    return x\n", 6, "nccl_metadata"),
    ("@functools.lru_cache(None)\ndef _init(n):\n    dist.all_gather_object([None] * 8, n)\n"
     "def solution(x):\n    _init(1)\n    return x\n", 3, "nccl_metadata"),
    ("_ready = False\ndef solution(x):\n    global _ready\n    if not _ready:\n"
     "        dist.barrier()\n        _ready = True\n    return x\n", 5, "nccl_metadata"),
    ("class _Runner:\n    def __init__(self, x):\n"
     "        self.h = symm_mem.rendezvous(x, 'g')\n    def __call__(self, x):\n        return x\n"
     "_r = None\ndef solution(x):\n    global _r\n    if _r is None:\n        _r = _Runner(x)\n"
     "    return _r(x)\n", 3, "rendezvous"),
])
def test_setup(body: str, line: int, kind: str) -> None:
    path, why = sites(body)[(line, kind)]
    assert path == "setup", why
    assert why


def test_is_initialized_is_true_under_the_profile() -> None:
    body = ("def solution(x):\n    if not dist.is_initialized():\n"
            "        dist.init_process_group('nccl')\n    dist.all_reduce(x)\n    return x\n")
    found = sites(body)
    assert found[(3, "nccl_metadata")][0] == "fallback"
    assert found[(4, "nccl_payload")][0] == "hot"


def test_world_size_one_takes_the_shortcut() -> None:
    body = ("def solution(x):\n    if dist.get_world_size() == 1:\n        return x.clone()\n"
            "    dist.all_reduce(x)\n    return x\n")
    assert path_at(body, 4, world_size=8) == "hot"
    assert path_at(body, 4, world_size=1) == "fallback"


def test_fallback_nccl_leaves_the_mechanisms_and_hot_list() -> None:
    row = inspect_source(HEAD + DTYPE_ELIF, "case.py")
    assert "nccl_payload" not in row.mechanisms
    assert row.nccl_on_hot_path == ()
    row16 = inspect_source(HEAD + DTYPE_ELIF, "case.py", Profile(dtype="float16"))
    assert "nccl_payload" in row16.mechanisms
    assert row16.nccl_on_hot_path == ("all_reduce",)


# --- copy-engine routes --------------------------------------------------------------------

COPIES = {
    "cuda-python peer async": """\
        from cuda import cudart
        def solution(x):
            out = torch.empty_like(x)
            cudart.cudaMemcpyPeerAsync(out.data_ptr(), 0, x.data_ptr(), 1, x.nbytes, 0)
            return out
    """,
    "cuda-python memcpy on an IPC pointer": """\
        from cuda import cudart
        _peer = {}
        def solution(x):
            h = [None] * 8
            dist.all_gather_object(h, 0)
            err, ptr = cudart.cudaIpcOpenMemHandle(h[1], 1)
            out = torch.empty_like(x)
            cudart.cudaMemcpyAsync(out.data_ptr(), ptr, x.nbytes, 3, 0)
            return out
    """,
    "cupy memcpyAsync on symmetric-memory pointers": """\
        import cupy as cp
        def solution(x):
            buf = symm_mem.empty(x.numel(), device=x.device, dtype=x.dtype)
            hdl = symm_mem.rendezvous(buf, 'g')
            src = hdl.buffer_ptrs[(hdl.rank + 1) % hdl.world_size]
            cp.cuda.runtime.memcpyAsync(buf.data_ptr(), src, x.nbytes, 3, 0)
            return buf
    """,
    "ctypes cudaMemcpy2DAsync": """\
        _rt = ctypes.CDLL('libcudart.so')
        def solution(x, peer_ptr: int = 0):
            out = torch.empty_like(x)
            _rt.cudaMemcpy2DAsync(ctypes.c_void_p(out.data_ptr()), 256,
                                  ctypes.c_void_p(peer_ptr), 256, 256, 8, 3, None)
            return out
    """,
    "torch copy_ from a tensor on a peer pointer": """\
        def _wrap(ptr, like):
            return torch.empty_like(like)  # stands for a dlpack wrapper
        def solution(x):
            hdl = symm_mem.rendezvous(x, 'g')
            peer = _wrap(hdl.buffer_ptrs[1], x)
            out = torch.empty_like(x)
            out.copy_(peer)
            return out
    """,
    "slice assignment from get_buffer": """\
        def solution(x):
            hdl = symm_mem.rendezvous(x, 'g')
            out = torch.empty_like(x)
            out[:] = hdl.get_buffer(1, x.shape, x.dtype)
            return out
    """,
}


@pytest.mark.parametrize("name", sorted(COPIES))
def test_copy_engine_routes(name: str) -> None:
    row = inspect_source(HEAD + textwrap.dedent(COPIES[name]), "case.py")
    copies = [s for s in row.call_sites if s.kind == "copy_engine"]
    assert [s.path for s in copies] == ["hot"], row.call_sites
    assert "copy_engine" in row.mechanisms
    assert row.evidence["copy_engine"][0][0] == copies[0].line


@pytest.mark.parametrize("body", [
    "def solution(x):\n    out = torch.empty_like(x)\n    out.copy_(x)\n    return out\n",
    "from cuda import cudart\ndef solution(x):\n    out = torch.empty_like(x)\n"
    "    cudart.cudaMemcpyAsync(out.data_ptr(), x.data_ptr(), x.nbytes, 3, 0)\n    return out\n",
    "def solution(x):\n    hdl = symm_mem.rendezvous(x, 'g')\n"
    "    own = hdl.get_buffer(hdl.rank, x.shape, x.dtype)\n    own.copy_(x)\n    return own\n",
    "def solution(x):\n    hdl = symm_mem.rendezvous(x, 'g')\n"
    "    mine = hdl.buffer_ptrs[rank]\n    return x\n",
])
def test_local_copies_are_not_copy_engine(body: str) -> None:
    row = inspect_source(HEAD + body, "case.py")
    assert not [s for s in row.call_sites if s.kind == "copy_engine"]
    assert "copy_engine" not in row.mechanisms


def test_peer_copy_in_cuda_source_takes_its_python_callers_path() -> None:
    body = textwrap.dedent('''\
        SRC = r"""
        #include <cuda_runtime.h>
        void pull(long dst, long src, long n, int dev, int peer) {
            cudaMemcpyPeerAsync((void*)dst, dev, (void*)src, peer, n, 0);
        }
        """
        from torch.utils.cpp_extension import load_inline
        _ext = load_inline("e", cpp_sources=SRC, functions=["pull"])
        def solution(x):
            if x.dtype != torch.bfloat16:
                _ext.pull(0, 0, 0, 0, 1)
            return x
    ''')
    found = sites(body)
    assert found[(4, "copy_engine")][0] == "fallback"
    assert "x.dtype != torch.bfloat16" in found[(4, "copy_engine")][1]


# --- the command --------------------------------------------------------------------------

def test_cli_profile_options(cli, tmp_path: Path) -> None:
    path = tmp_path / "dtype_fallback.py"
    path.write_text(HEAD + DTYPE_ELIF)
    default = cli("inspect", str(path), "--format", "json")
    assert default.code == 0, default.err
    data = json.loads(default.out)["files"][0]
    assert data["profile"].startswith("dtype bfloat16, world size 8")
    [site] = data["call_sites"]
    assert (site["path"], site["kind"], site["call"]) == ("fallback", "nccl_payload",
                                                         "all_reduce")
    assert site["line"] == HEAD.count("\n") + 7 and "dist.all_reduce(x)" in site["snippet"]
    half = cli("inspect", str(path), "--format", "json", "--dtype", "float16", "-w", "4")
    data = json.loads(half.out)["files"][0]
    assert data["call_sites"][0]["path"] == "hot" and "world size 4" in data["profile"]
    table = cli("inspect", str(path))
    assert "fallback nccl_payload  all_reduce" in table.out
    assert "else of `if x.dtype == torch.bfloat16`" in table.out


@pytest.mark.parametrize(("args", "message"), [
    (["--dtype", "fp8"], "--dtype fp8: unknown dtype"),
    (["--shape", "10xA"], "--shape 10xA"),
    (["--world-size", "0"], "world"),
])
def test_cli_bad_profile_is_one_line(cli, tmp_path: Path, args: list[str], message: str) -> None:
    path = tmp_path / "s.py"
    path.write_text(HEAD + DTYPE_ELIF)
    result = cli("inspect", str(path), *args)
    assert result.code == 2
    assert message in result.err and "Traceback" not in result.err
    assert len(result.err.strip().splitlines()) == 1
