"""The size rule and copies inside C++ (issue 32): which collectives are metadata, with their
bound, and which C++ memcpys are peer copies (tests/data/inspect_eval/README.md)."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest
from paths import DATA

from pkbsim.inspection.call_sites import CallSite
from pkbsim.inspection.profile import Profile
from pkbsim.inspection.sizes import MAX_METADATA_ELEMENTS
from pkbsim.inspection.solution import inspect_path, inspect_source
from pkbsim.report.inspect_report import render_json, render_table

SOLUTIONS = DATA / "solutions"
SIZE = re.compile(r"#\s*size:\s*(\d+) x (\w+)")


def nccl_sites(name: str) -> dict[int, CallSite]:
    [row] = inspect_path(SOLUTIONS / name)
    return {s.line: s for s in row.call_sites if s.kind.startswith("nccl")}


def test_each_bounded_collective_is_metadata_with_its_size() -> None:
    text = (SOLUTIONS / "metadata_sizes.py").read_text().splitlines()
    sizes = {n: m for n, t in enumerate(text, 1) if (m := SIZE.search(t))}
    payload = [n for n, t in enumerate(text, 1) if t.rstrip().endswith("# payload")]
    found = nccl_sites("metadata_sizes.py")
    assert len(sizes) == 15 and len(payload) == 8
    for line, m in sizes.items():
        site = found[line]
        assert (site.kind, site.elements, site.dtype) == (
            "nccl_metadata", int(m.group(1)), m.group(2)), text[line - 1]
    for line in payload:
        site = found[line]
        assert (site.kind, site.elements, site.dtype) == ("nccl_payload", None, None), \
            text[line - 1]


HEAD = "import torch\nimport torch.distributed as dist\nW = 8\n"


def one(body: str, profile: Profile | None = None) -> CallSite:
    row = inspect_source(HEAD + textwrap.dedent(body), "case.py", profile or Profile())
    [site] = [s for s in row.call_sites if s.kind.startswith("nccl")]
    return site


@pytest.mark.parametrize(("body", "elements"), [
    # a world-sized counts vector: 8 at W = 8, the bound follows the world size
    ("def solution(x):\n    c = torch.zeros(dist.get_world_size(), dtype=torch.int64)\n"
     "    dist.all_reduce(c)\n", 8),
    # the most a literal-sized factory may hold
    (f"def solution(x):\n    dist.all_reduce(torch.empty({MAX_METADATA_ELEMENTS}))\n",
     MAX_METADATA_ELEMENTS),
    # a list of per-parameter norms of a literal list
    ("def solution(a, b, c):\n    n = torch.stack([t.norm() for t in (a, b, c)])\n"
     "    dist.all_reduce(n)\n", 3),
    # a flag made from itself: s = s / W keeps one element
    ("def solution(x):\n    s = x.float().sum()\n    s = s / W\n    dist.all_reduce(s)\n", 1),
    # a helper's parameter takes what every caller passes
    ("def _sum(t):\n    dist.all_reduce(t)\n    return t\n"
     "def solution(x):\n    return _sum(torch.tensor([x.numel()]))\n", 1),
    # element-wise arithmetic of bounded tensors keeps them bounded
    ("def solution(x, y):\n    p = torch.maximum(x.max(), y.max())\n"
     "    dist.all_reduce(p)\n", 1),
    # a returned tuple's element, an attribute set anywhere in the file
    ("def _split(x, k):\n    return torch.bincount(x, minlength=k), torch.argsort(x)\n"
     "def solution(x, k: int = 4):\n    c, order = _split(x, k)\n"
     "    dist.all_to_all_single(torch.empty_like(c), c)\n", 4),
    ("class P:\n    pass\ndef solution(x):\n    p = P()\n"
     "    p.counts = torch.bincount(x, minlength=W)\n    dist.all_reduce(p.counts)\n", 8),
    # the pieces of a split by a list of W sizes; a bounded tensor's tolist()
    ("def solution(x):\n    parts = x.split([4] * W)\n"
     "    dist.all_reduce(torch.tensor([p.shape[0] for p in parts]))\n", 8),
    ("def solution(x, y):\n    c = torch.bincount(y, minlength=W).tolist()\n"
     "    dist.all_reduce(torch.tensor([int(v) for v in c]))\n", 8),
    # a loss reduced to one element (the default "mean")
    ("import torch.nn.functional as F\ndef solution(x, y):\n"
     "    dist.all_reduce(F.cross_entropy(x.float(), y).detach())\n", 1),
])
def test_bounded(body: str, elements: int) -> None:
    site = one(body)
    assert site.kind == "nccl_metadata" and site.elements == elements


@pytest.mark.parametrize("body", [
    # one more element than the rule allows
    f"def solution(x):\n    dist.all_reduce(torch.empty({MAX_METADATA_ELEMENTS + 1}))\n",
    # a count read off a tensor's value
    "def solution(x):\n    n = int(x.max().item())\n    dist.all_reduce(torch.zeros(n))\n",
    # sized by the input's rows, however it is reached
    "def solution(x):\n    rows = x.size(0) // W\n    dist.all_reduce(torch.zeros(rows))\n",
    "def _buf(n):\n    return torch.empty(n)\n"
    "def solution(x):\n    dist.all_reduce(_buf(x.shape[1]))\n",
    # a list whose length is the input's: one norm per row
    "def solution(x):\n    dist.all_reduce(torch.stack([r.norm() for r in x]))\n",
    # grown in a loop: t = cat([t, t]) is not bounded by its first value
    "def solution(x):\n    t = torch.zeros(1)\n    for _ in range(x.shape[0]):\n"
    "        t = torch.cat([t, t])\n    dist.all_reduce(t)\n",
    # an index tensor may repeat elements
    "def solution(x, idx):\n    dist.all_reduce(torch.zeros(4)[idx])\n",
    # a bit cast of the input
    "def solution(x):\n    dist.all_reduce(x.view(torch.uint8))\n",
    # a loss per element; one entry per item of a parameter's list
    "import torch.nn.functional as F\ndef solution(x, y):\n"
    "    dist.all_reduce(F.mse_loss(x, y, reduction='none'))\n",
    "def solution(x, seqs):\n    dist.all_reduce(torch.tensor([len(s) for s in seqs]))\n",
])
def test_not_bounded(body: str) -> None:
    site = one(body)
    assert site.kind == "nccl_payload" and site.elements is None


def test_the_bound_follows_the_profile_world_size() -> None:
    body = ("def solution(x):\n    dist.all_gather_into_tensor(torch.empty(W * W),"
            " torch.zeros(dist.get_world_size()))\n")
    assert one(body, Profile(world_size=4)).elements == 4
    assert one(body, Profile(world_size=8)).elements == 8


def test_batched_p2p_of_bounded_tensors_is_metadata() -> None:
    body = ("def solution(x):\n    n = torch.tensor([x.numel()])\n    m = torch.empty(1)\n"
            "    ops = [dist.P2POp(dist.isend, n, 1), dist.P2POp(dist.irecv, m, 1)]\n"
            "    dist.batch_isend_irecv(ops)\n")
    assert (one(body).kind, one(body).elements) == ("nccl_metadata", 2)
    payload = body.replace("dist.P2POp(dist.irecv, m, 1)", "dist.P2POp(dist.irecv, x, 1)")
    assert one(payload).kind == "nccl_payload"


def test_the_bound_is_in_the_json_and_the_table() -> None:
    [row] = inspect_path(SOLUTIONS / "metadata_sizes.py")
    doc = json.loads(render_json([row]))
    sites = {s["line"]: s for s in doc["files"][0]["call_sites"]}
    assert sites[24]["elements"] == 8 and sites[24]["dtype"] == "int64"
    assert "elements" not in sites[48] and "dtype" not in sites[48]  # optional: payload
    table = render_table([row])
    assert re.search(r"line\s+24\s+hot\s+nccl_metadata all_gather_into_tensor \(8 x int64\)",
                     table)


# --- copies inside C++ ----------------------------------------------------------------------

def test_cpp_copies_on_peer_pointers_are_copy_engine() -> None:
    path = SOLUTIONS / "copy_engine_cpp.py"
    text = path.read_text().splitlines()
    expected = [n for n, t in enumerate(text, 1) if t.rstrip().endswith("// peer copy")]
    [row] = inspect_path(path)
    copies = [s for s in row.call_sites if s.kind == "copy_engine"]
    assert [s.line for s in copies] == expected and len(expected) == 4
    assert all(s.path == "hot" for s in copies)
    # the local copies: this rank's own entry, a local tensor, a pointer-table upload
    local = [n for n, t in enumerate(text, 1) if re.search(r"\bcudaMemcpy(Async)?\(", t)
             and n not in expected]
    assert len(local) == 3


CPP = '''\
SRC = r"""
#include <cuda_runtime.h>
void copy(long dst, long src, long n) {
    cudaMemcpyAsync((void*)dst, (void*)src, n, cudaMemcpyDeviceToDevice, 0);
}
"""
from torch.utils.cpp_extension import load_inline
import torch.distributed._symmetric_memory as symm_mem
_ext = load_inline("e", cpp_sources=SRC, functions=["copy"])
def solution(x):
    hdl = symm_mem.rendezvous(x, "g")
    out = torch.empty_like(x)
    _ext.copy(out.data_ptr(), SRC_PTR, x.nbytes)
    return out
'''


@pytest.mark.parametrize(("src", "peer"), [
    ("hdl.buffer_ptrs[(hdl.rank + 1) % hdl.world_size]", True),
    ("hdl.get_buffer(1, x.shape, x.dtype).data_ptr()", True),
    ("hdl.buffer_ptrs[hdl.rank]", False),  # this rank's own entry
    ("x.data_ptr()", False),
])
def test_a_python_argument_decides_the_cpp_copy(src: str, peer: bool) -> None:
    row = inspect_source(HEAD + CPP.replace("SRC_PTR", src), "case.py")
    copies = [s for s in row.call_sites if s.kind == "copy_engine"]
    assert [s.line for s in copies] == ([7] if peer else [])
    assert ("copy_engine" in row.mechanisms) == peer


def test_a_cpp_function_no_python_call_reaches_keeps_its_names() -> None:
    body = textwrap.dedent('''\
        SRC = r"""
        #include <cuda_runtime.h>
        void pull(void* dst, const void* remote, long n) {
            cudaMemcpyAsync(dst, remote, n, cudaMemcpyDeviceToDevice, 0);
        }
        void own(void* dst, std::vector<long> peer_ptrs, int rank, long n) {
            cudaMemcpyAsync(dst, (void*)peer_ptrs[rank], n, cudaMemcpyDeviceToDevice, 0);
        }
        """
        from torch.utils.cpp_extension import load_inline
        _ext = load_inline("e", cpp_sources=SRC)
        def solution(x):
            return x
    ''')
    row = inspect_source(HEAD + body, "case.py")
    assert [(s.line, s.path) for s in row.call_sites if s.kind == "copy_engine"] == [
        (7, "unknown")]


def test_schema_name_is_kept(tmp_path: Path) -> None:
    [row] = inspect_path(SOLUTIONS / "metadata_sizes.py")
    assert json.loads(render_json([row]))["schema"] == "pkbsim.inspect/1"


PYBIND = '''\
SRC = r"""
#include <torch/extension.h>
void push_impl(const at::Tensor& src, int64_t remote_ptr, int64_t own_ptr) {
    cudaMemcpyAsync((void*)remote_ptr, src.data_ptr(), src.nbytes(), cudaMemcpyDefault, 0);
    cudaMemcpyAsync((void*)own_ptr, src.data_ptr(), src.nbytes(), cudaMemcpyDefault, 0);
}
void table(at::Tensor dev, std::vector<int64_t> ptrs, int64_t rank, at::Tensor x) {
    std::vector<void*> h(ptrs.size());
    for (size_t i = 0; i < ptrs.size(); ++i) h[i] = (void*)ptrs[i];
    cudaMemcpy(dev.data_ptr(), h.data(), h.size() * 8, cudaMemcpyHostToDevice);
    cudaMemcpy(h[rank], x.data_ptr(), x.nbytes(), cudaMemcpyDefault);
    cudaMemcpy(x.data_ptr(), h[(rank + 1) % 8], x.nbytes(), cudaMemcpyDefault);
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("push", &push_impl);
    m.def("table", &table);
}
"""
from torch.utils.cpp_extension import load_inline
_ext = load_inline("e", cpp_sources=SRC)
def solution(x):
    rank = dist.get_rank()
    ptrs = [None] * dist.get_world_size()
    dist.all_gather_object(ptrs, x.data_ptr())
    _ext.push(x, ptrs[rank], ptrs[(rank + 1) % len(ptrs)])
    _ext.table(torch.empty(8, dtype=torch.int64), ptrs, rank, x)
    return x
'''


def test_pybind_bindings_pointer_tables_and_gathered_pointers() -> None:
    """The Python names a pybind11 ``.def`` gives: the flow, not the parameters' names,
    decides (the own pointer is passed as ``remote_ptr``); pointers exchanged with
    ``all_gather_object`` form a table; a host copy of it (``h[i] = ptrs[i]``) is a table
    too: its upload and its own entry are local."""
    row = inspect_source(HEAD + PYBIND, "case.py")
    copies = [(s.line, s.path) for s in row.call_sites if s.kind == "copy_engine"]
    assert copies == [(8, "hot"), (15, "hot")]


def test_a_cpp_helper_reached_only_from_cpp_takes_its_callers_arguments() -> None:
    """``a_copy(void* peer_dst, ...)`` called by the bound function with local pointers: its
    parameter's name no longer decides, whatever order the functions are read in."""
    body = textwrap.dedent('''\
        SRC = r"""
        static void a_copy(void* peer_dst, const void* src, long n) {
            cudaMemcpyAsync(peer_dst, src, n, cudaMemcpyDefault, 0);
        }
        void run(torch::Tensor out, torch::Tensor x) {
            a_copy(out.data_ptr(), x.data_ptr(), x.nbytes());
        }
        """
        from torch.utils.cpp_extension import load_inline
        _ext = load_inline("e", cpp_sources=SRC, functions=["run"])
        def solution(x):
            out = torch.empty_like(x)
            _ext.run(out, x)
            return out
    ''')
    row = inspect_source(HEAD + body, "case.py")
    assert not [s for s in row.call_sites if s.kind == "copy_engine"]
