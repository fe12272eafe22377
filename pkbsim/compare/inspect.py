"""Static inspection of a PKB solution file: what moves the data, what waits, what runs per call.

Pure: source text and a file name in, an ``Inspection`` out. Python is read through ``ast``, so
comments and docstrings never count. CUDA and PTX are read from string literals that are device
source (they hold ``__global__``, ``asm(``, ``#include``..., or are passed to load_inline,
cupy.RawKernel, tl.inline_asm_elementwise...), after blanking ``//`` and ``/* */`` comments and
the C string literals outside ``asm(...)``. *Per call* means reached from ``solution()`` on every
call: what sits behind a cache check (``if _ext is None:``, ``if key not in _cache:``, after an
early ``return`` of a cached value, in an ``@functools.cache`` function) runs once. Every
mechanism and every True flag carries (line, snippet) evidence.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pkbsim.compare.vocab import FLAGS, MECHANISMS
from pkbsim.errors import PkbsimError

MAX_CAPPED_GRID_BLOCKS = 16  # a literal grid below this is far under any GPU's SM count
SNIPPET_CHARS = 120

Evidence = Mapping[str, tuple[tuple[int, str], ...]]


class InspectError(PkbsimError):
    """A solution file cannot be read or parsed."""


@dataclass(frozen=True)
class Inspection:
    """What one solution file does, with the lines that show it."""

    file: str
    mechanisms: tuple[str, ...] = ()  # sorted names from vocab.MECHANISMS
    nccl_on_hot_path: tuple[str, ...] = ()  # e.g. "all_reduce", "barrier (metadata)"
    custom_kernels: int = 0
    host_barrier_per_call: bool = False
    device_barrier: bool = False
    host_sync: bool = False
    per_call_rendezvous: bool = False
    fused_comm_compute: bool = False
    overlap_attempt: bool = False
    one_shot: bool = False
    grid_capped: bool = False
    uncoalesced_peer: bool = False
    evidence: Evidence = field(default_factory=dict)  # name -> ((line, snippet), ...)
    notes: tuple[str, ...] = ()
    error: str | None = None  # set on a directory row whose file could not be inspected

    @property
    def flags(self) -> dict[str, bool]:
        return {name: bool(getattr(self, name)) for name in FLAGS}


def inspect_path(path: Path) -> list[Inspection]:
    """A file, or every ``*.py`` under a folder (sorted); a folder's unreadable or unparsable
    file becomes a row with ``error`` set, a lone file's raises InspectError."""
    path = path.expanduser()
    if path.is_dir():
        files = sorted(p for p in path.rglob("*.py") if p.is_file())
        if not files:
            raise InspectError("no *.py files in this folder", file=str(path))
        rows = []
        for file in files:
            try:
                rows.append(inspect_file(file))
            except InspectError as exc:
                rows.append(Inspection(file=str(file), error=exc.one_line()))
        return rows
    return [inspect_file(path)]


def inspect_file(path: Path) -> Inspection:
    try:
        source = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InspectError("no such file", file=str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InspectError(f"cannot read ({exc})", file=str(path)) from None
    return inspect_source(source, str(path))


def inspect_source(source: str, file: str) -> Inspection:
    try:
        tree = ast.parse(source, filename=file)
    except SyntaxError as exc:
        raise InspectError(f"Python syntax error: {exc.msg}", file=file,
                           field=f"line {exc.lineno}") from None
    py = _Python(tree)
    ev = _Evidence(source.splitlines())
    sources = _device_sources(py)
    kernels = [k for src in sources for k in _c_kernels(src)]
    nccl = _python_calls(py, ev)
    _python_peers(py, ev)
    for src in sources:
        _c_patterns(src, ev)
    for kernel in kernels:
        _c_kernel(kernel, ev)
    _triton(py, ev, sources)  # after the device sources: their peer lines count in kernels
    count = _count_kernels(py, sources, kernels, ev)
    if count:  # symmetric-memory pointers handed to this file's own kernels
        ev.copy(_SM_PEER_PTRS, "sm_peer_ldst")
    notes = [] if py.solutions else ["no solution() found: every function counts as per call"]
    has = ev.has
    return Inspection(
        file=file, mechanisms=tuple(sorted(m for m in MECHANISMS if has(m))),
        nccl_on_hot_path=tuple(nccl), custom_kernels=count,
        host_barrier_per_call=has("host_barrier_per_call"), device_barrier=has("device_barrier"),
        host_sync=has("host_sync"), per_call_rendezvous=has("per_call_rendezvous"),
        fused_comm_compute=has("fused_comm_compute"), overlap_attempt=has("overlap_attempt"),
        one_shot=has("one_shot"), grid_capped=has("grid_capped"),
        uncoalesced_peer=has("uncoalesced_peer"), evidence=ev.freeze(), notes=tuple(notes))


# --- evidence ----------------------------------------------------------------------------------

class _Evidence:
    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.found: dict[str, dict[int, str]] = {}

    def add(self, name: str, line: int) -> None:
        text = self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""
        self.found.setdefault(name, {}).setdefault(line, text[:SNIPPET_CHARS])

    def has(self, name: str) -> bool:
        return bool(self.found.get(name))

    def copy(self, src: str, dst: str) -> None:
        for line in self.found.get(src, {}):
            self.add(dst, line)

    def freeze(self) -> dict[str, tuple[tuple[int, str], ...]]:
        return {name: tuple(sorted(lines.items())) for name, lines in sorted(self.found.items())
                if not name.startswith("_")}


# --- names and patterns ------------------------------------------------------------------------

PEER_NAME = re.compile(r"(?i)peer|remote|ptrs|bufs|buffers|symm|multicast|mc_ptr")
WORLD_NAME = re.compile(r"(?i)world|n_?ranks|num_?ranks|n_?devices|num_?devices|n_?peers|"
                        r"num_?peers|npes|n_?gpus|num_?gpus|\bW\b|\bws\b")
SLICE_NAME = re.compile(r"(?i)rank|chunk|shard|slice|\bpart\b|dev_idx")
OWN_RANK = re.compile(r"(?i)^(?:[\w.]+\.)?(?:my_|local_|own_)?rank$|get_rank\(\)$")
DEVICE_MARKER = re.compile(r'__global__|__device__|#include|\basm\s*(?:volatile\s*|__volatile__'
                           r'\s*)?\(|extern\s+"C"|PYBIND11_MODULE')
DEVICE_SINKS = {"load_inline", "compile_cuda_extension", "RawKernel", "RawModule",
                "ElementwiseKernel", "ReductionKernel", "inline_asm_elementwise", "SourceModule"}

DIST_PREFIXES = ("torch.distributed.", "torch.ops._c10d_functional.",
                 "torch.ops.c10d_functional.")
DIST_DATA = {"all_reduce", "all_gather", "all_gather_into_tensor", "_all_gather_base",
             "all_gather_coalesced", "all_reduce_coalesced", "reduce_scatter",
             "reduce_scatter_tensor", "_reduce_scatter_base", "all_to_all", "all_to_all_single",
             "broadcast", "reduce", "gather", "scatter", "send", "recv", "isend", "irecv",
             "batch_isend_irecv", "all_gather_tensor", "permute_tensor"}
DIST_OBJECT = {"all_gather_object", "broadcast_object_list", "gather_object",
               "scatter_object_list", "send_object_list", "recv_object_list"}
DIST_HOST_BARRIER = {"barrier", "monitored_barrier"} | DIST_OBJECT
DIST_METADATA = {"new_group", "new_subgroups", "init_process_group",
                 "destroy_process_group"} | DIST_HOST_BARRIER
LITERAL_TENSOR = {"tensor", "as_tensor", "LongTensor", "IntTensor", "FloatTensor"}

PY_COPY_ENGINE = {"memcpyPeer", "memcpyPeerAsync", "cudaMemcpyPeer", "cudaMemcpyPeerAsync",
                  "cuMemcpyPeer", "cuMemcpyPeerAsync"}
PY_PEER_POINTERS = {"buffer_ptrs", "buffer_ptrs_dev", "ipcOpenMemHandle", "cudaIpcOpenMemHandle"}
PY_TK = {"TKParallelTensor", "get_or_create_parallel_tensor", "create_parallel_tensor"}
PY_RENDEZVOUS = {"rendezvous", "ipcGetMemHandle", "ipcOpenMemHandle", "cudaIpcGetMemHandle",
                 "cudaIpcOpenMemHandle", "TKParallelTensor", "create_parallel_tensor"}
PY_SYNC = {"synchronize", "deviceSynchronize", "streamSynchronize", "cudaDeviceSynchronize",
           "cudaStreamSynchronize"}
PY_SYNC_NO_ARGS = {"item", "tolist", "cpu"}
PY_HANDLE_BARRIER = {"barrier", "put_signal", "wait_signal"}
PY_STREAM = {"torch.cuda.Stream", "torch.cuda.stream", "cupy.cuda.Stream"}
PY_CHUNKING = {"chunk", "split", "tensor_split"}
SYMM_OPS = "torch.ops.symm_mem."
SYMM_FUSED = ("fused_all_gather_matmul", "fused_matmul_reduce_scatter",
              "fused_all_gather_scaled_matmul")
TRITON_BARRIER = {"blockwise_barrier", "send_signal", "wait_signal", "symm_mem_sync"}
TRITON_COMPUTE = {"dot", "dot_scaled", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sigmoid",
                  "softmax", "erf", "tanh", "cos", "sin"}
_SM_PEER_PTRS = "_peer_pointers"  # private: symmetric-memory pointers, counted with a kernel

C_MECHANISMS = {
    "copy_engine": r"\b(?:cuda|cu)Memcpy(?:3D)?Peer(?:Async)?\s*\(",
    "tma": r"\bcp\.async\.bulk\b|\bcp_async_bulk\w*|\bCUtensorMap\b|\bcuTensorMapEncode\w*"
           r"|\btma::\w+",
    "nvls_multimem": r"\bmultimem\.(?:ld_reduce|st|red)\b|\bmultimem\s*<",
    "nvshmem": r"\bnvshmemx?_\w+\s*\(",
    "tk_pgl": r"\bpgl\s*<|\bTKParallelTensor\b|\bparallel_tensor_to_pgl\b",
    "sm_peer_ldst": r"\bcudaIpcOpenMemHandle\s*\(|\bcuMemImportFromShareableHandle\s*\(",
    "device_barrier": r"\bbarrier_all\s*\(|\bnvshmemx?_(?:barrier|sync|signal_wait)\w*\s*\("
                      r"|\batomic\w+_system\s*\(|(?<!multimem\.)\batom\.[\w.]*\bsys\b"
                      r"|\b(?:atom|red|ld|st)\.(?=[\w.]*\b(?:acquire|release|acq_rel)\b)"
                      r"(?=[\w.]*\bsys\b)"
                      r"|\bthread_scope_system\b|\bcuStreamWaitValue\w*\s*\(",
    "overlap_attempt": r"\bcudaStreamCreate\w*\s*\(|\bcudaStreamWaitEvent\s*\(",
    "host_sync": r"\bcuda(?:Device|Stream|Event)Synchronize\s*\(",
}
C_SETUP_FUNCTION = re.compile(r"(?i)init|setup|open|create|register|alloc|exchange|handle")
C_COMPUTE = re.compile(r"\b(?:wgmma|mma|wmma|hmma)\b|\bmma_\w+\s*[<(]|\b(?:__hfma2?|fmaf|__expf"
                       r"|expf?|exp2f?|__logf|logf?|rsqrtf?|sqrtf?|tanhf?)\s*\(")
C_PEER_MARKER = re.compile(r"\bmultimem\b|\.mc_ptr\b|\bG\.\w+\s*\[|\bnvshmemx?_\w*(?:put|get)"
                           r"\w*\s*\(")
C_SMALL_TYPES = {"char", "signed char", "unsigned char", "int8_t", "uint8_t", "bool", "short",
                 "unsigned short", "int16_t", "uint16_t", "half", "__half", "__nv_bfloat16",
                 "nv_bfloat16", "bf16", "at::Half", "at::BFloat16", "c10::Half", "c10::BFloat16"}
C_THREAD_INDEX = r"(?:threadIdx\.[xyz]|tid|idx|lane|thread_id|gid|i)"
C_STRIDED = re.compile(rf"\b{C_THREAD_INDEX}\s*\*\s*(?!1\b)\w|\w\s*\*\s*{C_THREAD_INDEX}\b")
C_NOT_FUNCTIONS = {"if", "for", "while", "switch", "catch", "return", "sizeof"}


# --- the Python side ---------------------------------------------------------------------------

@dataclass(frozen=True)
class _Region:
    """An expression or simple statement in code that runs, and whether it runs every call."""

    root: ast.AST
    per_call: bool
    function: ast.FunctionDef | ast.AsyncFunctionDef | None


Function = ast.FunctionDef | ast.AsyncFunctionDef


class _Python:
    """Imports, functions, Triton kernels and the regions reached from ``solution()``."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.aliases = _aliases(tree)
        self.parents = {child: node for node in ast.walk(tree)
                        for child in ast.iter_child_nodes(node)}
        self.functions: dict[str, list[Function]] = {}
        self.methods: dict[str, list[Function]] = {}
        self.classes: dict[str, ast.ClassDef] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                self.classes[node.name] = node
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                in_class = isinstance(self.parents.get(node), ast.ClassDef)
                (self.methods if in_class else self.functions).setdefault(node.name, []).append(
                    node)
        self.jit = [f for fs in self.functions.values() for f in fs if self._decorated(f, "jit")]
        self.state = _module_state(tree)
        self.builders, self.extensions = self._extensions()
        self.solutions = self.functions.get("solution", [])
        self.loops: list[ast.For | ast.AsyncFor] = []  # for-statements of code that runs
        self.regions = self._reach()

    def dotted(self, node: ast.AST) -> str | None:
        """``a.b.c`` with the first name resolved through the imports."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        parts.append(self.aliases.get(node.id, node.id))
        return ".".join(reversed(parts))

    def nodes(self) -> Iterator[tuple[ast.AST, _Region]]:
        """Every node of code that runs, with its region; loops come as their statements."""
        for region in self.regions:
            for node in ast.walk(region.root):
                yield node, region

    def _decorated(self, fn: Function, last: str) -> bool:
        for dec in fn.decorator_list:
            target = dec.func if isinstance(dec, ast.Call) else dec
            name = self.dotted(target) or ""
            if name.split(".")[-1] == last and (last != "jit" or "triton" in name):
                return True
        return False

    def _reach(self) -> list[_Region]:
        """Regions of module code (once), and of functions reached from solution() with
        whether each runs on every call."""
        regions: list[_Region] = []
        self._block(self.tree.body, False, None, regions)
        mode: dict[Function, bool] = {}
        todo: list[tuple[Function, bool]] = [
            (f, True) for f in self.solutions or [f for fs in self.functions.values()
                                                   for f in fs if f not in self.jit]]
        while todo:
            fn, per_call = todo.pop()
            per_call = per_call and not any(self._decorated(fn, c) for c in ("cache",
                                                                             "lru_cache"))
            if fn in mode and (mode[fn] or not per_call):
                continue
            mode[fn] = per_call
            found: list[_Region] = []
            self._block(fn.body, per_call, fn, found)
            regions.extend(found)
            for call, region in ((c, r) for r in found for c in ast.walk(r.root)
                                 if isinstance(c, ast.Call)):
                todo.extend((callee, region.per_call) for callee in self.callees(call))
        return regions

    def callees(self, call: ast.Call) -> list[Function]:
        if isinstance(call.func, ast.Name):
            cls = self.classes.get(call.func.id)
            if cls is not None:
                return [f for f in cls.body if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
                        and f.name in ("__init__", "__call__")]
            return [f for f in self.functions.get(call.func.id, []) if f not in self.jit]
        if isinstance(call.func, ast.Attribute):
            owner = self.classes.get(_last(call.func.value))
            if owner is not None:  # Cls.method(...); Cls.apply(...) runs Cls.forward
                wanted = "forward" if call.func.attr == "apply" else call.func.attr
                return [f for f in owner.body if isinstance(f, ast.FunctionDef
                                                            | ast.AsyncFunctionDef)
                        and f.name == wanted]
            return self.methods.get(call.func.attr, [])
        return []

    def all_functions(self) -> list[Function]:
        return [f for fs in (*self.functions.values(), *self.methods.values()) for f in fs]

    def communicating(self) -> set[Function]:
        """Functions that move data between GPUs, directly or through the functions they call."""
        found = {f for f in self.all_functions()
                 if any(self.moves_data(n) for n in ast.walk(f))}
        while True:
            more = {f for f in self.all_functions() if any(
                c in found for n in ast.walk(f) if isinstance(n, ast.Call)
                for c in self.callees(n))} - found
            if not more:
                return found
            found |= more

    def moves_data(self, node: ast.AST) -> bool:
        """A call to torch.distributed, symmetric memory, a Triton kernel (``k[grid](...)``)
        or a compiled extension (``_ext.f(...)``, ``_get_ext().f(...)``)."""
        if not isinstance(node, ast.Call):
            return False
        name, short = self.dotted(node.func) or "", _last(node.func)
        receiver = node.func.value if isinstance(node.func, ast.Attribute) else None
        return ((name.startswith(DIST_PREFIXES) and _listed_dist(name, short))
                or name.startswith((SYMM_OPS, "torch.distributed._symmetric_memory"))
                or short == "get_buffer" or isinstance(node.func, ast.Subscript)
                or (isinstance(receiver, ast.Name) and receiver.id in self.extensions)
                or (isinstance(receiver, ast.Call)
                    and any(f in self.builders for f in self.callees(receiver))))

    def _extensions(self) -> tuple[set[Function], set[str]]:
        """Functions that compile an extension, and names bound to one."""
        builders = {f for f in self.all_functions() if any(
            isinstance(n, ast.Call) and _last(n.func) in DEVICE_SINKS for n in ast.walk(f))}
        names = {t for n in ast.walk(self.tree) if isinstance(n, ast.Assign)
                 and isinstance(n.value, ast.Call) and (_last(n.value.func) in DEVICE_SINKS or any(
                     f in builders for f in self.callees(n.value))) for t in _targets(n)}
        return builders, names

    def _block(self, stmts: list[ast.stmt], per_call: bool, fn: Function | None,
               out: list[_Region]) -> None:
        for stmt in stmts:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                continue
            if isinstance(stmt, ast.If) and per_call and self._guard(stmt.test, fn):
                miss_in_body = _miss_in_body(stmt.test)
                out.append(_Region(stmt.test, per_call, fn))
                self._block(stmt.body, not miss_in_body, fn, out)
                self._block(stmt.orelse, miss_in_body, fn, out)
                hit = stmt.orelse if miss_in_body else stmt.body
                if any(isinstance(n, ast.Return) for s in hit for n in ast.walk(s)):
                    per_call = False  # the rest runs only on a cache miss
                continue
            if isinstance(stmt, ast.For | ast.AsyncFor) and stmt not in self.loops:
                self.loops.append(stmt)
            headers, bodies = _split(stmt)
            out.extend(_Region(h, per_call, fn) for h in headers)
            for body in bodies:
                self._block(body, per_call, fn, out)

    def _guard(self, test: ast.expr, fn: Function | None) -> bool:
        """Does this test read cached state (module-level mutable names, globals, self.x)?"""
        state = set(self.state)
        if fn is not None:
            state |= {n for g in ast.walk(fn) if isinstance(g, ast.Global) for n in g.names}
            for _ in range(2):  # locals derived from state: c = _cache.get(key)
                for node in ast.walk(fn):
                    if isinstance(node, ast.Assign) and _reads(node.value, state):
                        state |= _targets(node)
        return _reads(test, state)


def _aliases(tree: ast.Module) -> dict[str, str]:
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def _module_state(tree: ast.Module) -> set[str]:
    """Module-level names holding caches: assigned None or a container, or declared global."""
    state = {n for g in ast.walk(tree) if isinstance(g, ast.Global) for n in g.names}
    for stmt in tree.body:
        value = stmt.value if isinstance(stmt, ast.Assign | ast.AnnAssign) else None
        targets = (stmt.targets if isinstance(stmt, ast.Assign) else
                   [stmt.target] if isinstance(stmt, ast.AnnAssign) else [])
        mutable = (isinstance(value, ast.Dict | ast.List | ast.Set)
                   or (isinstance(value, ast.Constant) and value.value is None)
                   or (isinstance(value, ast.Call) and _last(value.func) in (
                       "dict", "list", "set", "OrderedDict", "defaultdict")))
        if mutable:
            state |= {t.id for t in targets if isinstance(t, ast.Name)}
    return state


def _reads(node: ast.AST, names: set[str]) -> bool:
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and n.id in names:
            return True
        if (isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                and n.value.id in ("self", "cls")):
            return True
    return False


def _miss_in_body(test: ast.expr) -> bool:
    """True when the if-body is the cache-miss branch (``x is None``, ``k not in c``, ``not x``)."""
    if isinstance(test, ast.BoolOp):
        return _miss_in_body(test.values[0])
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return True
    if isinstance(test, ast.Compare):
        op = test.ops[0]
        none = isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None
        return isinstance(op, ast.NotIn | ast.NotEq) or (isinstance(op, ast.Is) and none)
    return False


def _split(stmt: ast.stmt) -> tuple[list[ast.AST], list[list[ast.stmt]]]:
    """A statement's header expressions and its bodies; a simple statement is its own header."""
    headers: list[ast.AST] = []
    bodies: list[list[ast.stmt]] = []
    for _, value in ast.iter_fields(stmt):
        items = value if isinstance(value, list) else [value]
        if items and isinstance(items[0], ast.stmt):
            bodies.append(items)
            continue
        for item in items:
            if isinstance(item, ast.withitem):
                headers.append(item.context_expr)
            elif isinstance(item, ast.ExceptHandler | ast.match_case):
                bodies.append(item.body)
            elif isinstance(item, ast.expr):
                headers.append(item)
    return ([stmt], []) if not bodies else (headers, bodies)


def _last(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _text(node: ast.AST) -> str:
    return ast.unparse(node)


# --- Python detectors --------------------------------------------------------------------------

def _python_calls(py: _Python, ev: _Evidence) -> list[str]:
    """torch.distributed on the hot path, host syncs and barriers, rendezvous, streams,
    chunking, library mechanisms, literal grids. Returns nccl_on_hot_path in line order."""
    nccl: dict[str, int] = {}  # entry -> first line
    for node, region in py.nodes():
        if isinstance(node, ast.Attribute) and node.attr in PY_PEER_POINTERS:
            ev.add(_SM_PEER_PTRS, node.lineno)
        if not isinstance(node, ast.Call):
            continue
        name = py.dotted(node.func) or ""
        short = name.rsplit(".", 1)[-1] if name else _last(node.func)  # `ar` -> all_reduce
        if region.per_call and name.startswith(DIST_PREFIXES) and _listed_dist(name, short):
            metadata = short in DIST_METADATA or _literal_tensor_arg(node, region.function)
            entry = f"{short} (metadata)" if metadata else short
            nccl[entry] = min(nccl.get(entry, node.lineno), node.lineno)
            ev.add("nccl_on_hot_path", node.lineno)
            if short in DIST_DATA and not metadata:
                ev.add("nccl_payload", node.lineno)
            if short in DIST_HOST_BARRIER:
                ev.add("host_barrier_per_call", node.lineno)
        if region.per_call:
            _per_call_flags(node, name, short, ev)
        _library_mechanisms(node, name, short, ev)
        _overlap(node, name, short, ev)
        _python_grid(py, node, region.function, ev)
    communicating = py.communicating()
    for loop in py.loops:
        if _chunk_loop(loop) and any(
                py.moves_data(n) or any(f in communicating for f in py.callees(n))
                for s in loop.body for n in ast.walk(s) if isinstance(n, ast.Call)):
            ev.add("overlap_attempt", loop.lineno)
    return sorted(nccl, key=lambda entry: (nccl[entry], entry))


def _listed_dist(name: str, short: str) -> bool:
    """A torch.distributed call worth listing: not a query (get_*, is_*), not a class."""
    return (not name.startswith("torch.distributed._symmetric_memory") and bool(short)
            and not short[0].isupper() and not short.startswith(("get_", "is_")))


def _literal_tensor_arg(call: ast.Call, fn: Function | None) -> bool:
    """Is the first argument built from a Python literal (``torch.tensor([n])``): metadata?"""
    arg = call.args[0] if call.args else next((k.value for k in call.keywords
                                               if k.arg in ("tensor", "input")), None)
    if isinstance(arg, ast.Name) and fn is not None:
        values = [n.value for n in ast.walk(fn) if isinstance(n, ast.Assign)
                  and any(isinstance(t, ast.Name) and t.id == arg.id for t in n.targets)]
        arg = values[-1] if values else None
    return (isinstance(arg, ast.Call) and _last(arg.func) in LITERAL_TENSOR and bool(arg.args)
            and isinstance(arg.args[0], ast.List | ast.Tuple | ast.Constant))


def _per_call_flags(call: ast.Call, name: str, short: str, ev: _Evidence) -> None:
    line = call.lineno
    if short in PY_SYNC or (short in PY_SYNC_NO_ARGS and isinstance(call.func, ast.Attribute)
                            and not call.args and not call.keywords):
        ev.add("host_sync", line)
    if short in PY_RENDEZVOUS or name == "torch.distributed._symmetric_memory.empty":
        ev.add("per_call_rendezvous", line)
    if (short in PY_HANDLE_BARRIER and isinstance(call.func, ast.Attribute)
            and not name.startswith("torch.distributed")):
        ev.add("device_barrier", line)


def _library_mechanisms(call: ast.Call, name: str, short: str, ev: _Evidence) -> None:
    line = call.lineno
    if short in PY_COPY_ENGINE:
        ev.add("copy_engine", line)
    if short in PY_TK:
        ev.add("tk_pgl", line)
    if "nvshmem" in name.lower() or (name.startswith(SYMM_OPS) and short.endswith("_vdev")):
        ev.add("nvshmem", line)
    if short in PY_PEER_POINTERS:
        ev.add(_SM_PEER_PTRS, line)
    if not name.startswith(SYMM_OPS) and short not in SYMM_FUSED:
        return
    if "multimem" in short:
        ev.add("nvls_multimem", line)
    elif "one_shot" in short or "two_shot" in short:
        ev.add("sm_peer_ldst", line)
    if "one_shot" in short:
        ev.add("one_shot", line)
    if short in SYMM_FUSED:
        ev.add("fused_comm_compute", line)


def _overlap(call: ast.Call, name: str, short: str, ev: _Evidence) -> None:
    async_op = any(k.arg == "async_op" and isinstance(k.value, ast.Constant) and k.value.value
                   for k in call.keywords)
    if name in PY_STREAM or short in ("wait_stream", "wait_event") or async_op:
        ev.add("overlap_attempt", call.lineno)


def _chunk_loop(node: ast.For | ast.AsyncFor) -> bool:
    """A loop over chunks: ``for c in x.chunk(n)``, ``for i in range(num_chunks)``."""
    text = f"{_text(node.target)} {_text(node.iter)}"
    splits = any(isinstance(n, ast.Call) and _last(n.func) in PY_CHUNKING
                 for n in ast.walk(node.iter))
    return splits or "chunk" in text.lower()


def _line(node: ast.AST, py: _Python) -> int:
    while not hasattr(node, "lineno"):
        node = py.parents[node]
    return int(getattr(node, "lineno"))  # noqa: B009 - ast nodes type lineno loosely


def _python_grid(py: _Python, call: ast.Call, fn: Function | None, ev: _Evidence) -> None:
    """Literal launch grids: ``kernel[(4,)](...)``, ``grid=(8,)``, cupy ``k((8,), (256,), a)``."""
    grid: ast.AST | None = None
    block: ast.AST | None = None
    if isinstance(call.func, ast.Subscript) and isinstance(call.func.value, ast.Name) and (
            call.func.value.id in {f.name for f in py.jit} or isinstance(call.func.slice,
                                                                         ast.Tuple)):
        grid = call.func.slice
    elif any(k.arg == "grid" for k in call.keywords):
        grid = next(k.value for k in call.keywords if k.arg == "grid")
        block = next((k.value for k in call.keywords if k.arg == "block"), None)
    elif len(call.args) >= 3 and all(isinstance(a, ast.Tuple) for a in call.args[:2]):
        grid, block = call.args[0], call.args[1]
    blocks = _py_literal(py, grid, fn) if grid is not None else None
    threads = _py_literal(py, block, fn) if block is not None else None
    if blocks is not None and blocks < MAX_CAPPED_GRID_BLOCKS and (blocks, threads) != (1, 1):
        ev.add("grid_capped", call.lineno)


def _py_literal(py: _Python, node: ast.AST, fn: Function | None, depth: int = 0) -> int | None:
    """The product of a literal grid: an int, a tuple of ints, a lambda or a name bound once."""
    if depth > 3:
        return None
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.Tuple | ast.List) and node.elts:
        sizes = [_py_literal(py, e, fn, depth + 1) for e in node.elts]
        return math.prod(s for s in sizes if s is not None) if None not in sizes else None
    if isinstance(node, ast.Lambda):
        return _py_literal(py, node.body, fn, depth + 1)
    if isinstance(node, ast.Name):
        scopes: list[ast.AST] = [s for s in (fn, py.tree) if s is not None]
        for scope in scopes:
            values = [a.value for a in ast.walk(scope) if isinstance(a, ast.Assign)
                      and any(isinstance(t, ast.Name) and t.id == node.id for t in a.targets)]
            if values:
                return _py_literal(py, values[0], fn, depth + 1) if len(values) == 1 else None
    return None


def _python_peers(py: _Python, ev: _Evidence) -> None:
    """Peer tensors from symmetric memory (``hdl.get_buffer(peer, ...)``): copied with copy_
    (copy engine), used in torch arithmetic (SM loads), read whole in a loop over all ranks."""
    peers: set[str] = set()
    for node, _ in py.nodes():
        if isinstance(node, ast.Assign) and any(_is_peer_buffer(n) for n in ast.walk(node.value)):
            peers |= _targets(node)

    def mentions(node: ast.AST) -> bool:
        return any(_is_peer_buffer(n) or (isinstance(n, ast.Name) and n.id in peers)
                   for n in ast.walk(node))

    for node, _ in py.nodes():
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "copy_":
            if mentions(node.func.value) or any(mentions(a) for a in node.args):
                ev.add("copy_engine", node.lineno)
        elif isinstance(node, ast.BinOp | ast.AugAssign) and any(
                mentions(o) for o in _operands(node)):
            ev.add("sm_peer_ldst", node.lineno)
        elif isinstance(node, ast.comprehension):
            _python_one_shot(py, node, ev)
    for loop in py.loops:
        _python_one_shot(py, loop, ev)


def _operands(node: ast.BinOp | ast.AugAssign) -> list[ast.expr]:
    return [node.left, node.right] if isinstance(node, ast.BinOp) else [node.value]


def _targets(node: ast.Assign) -> set[str]:
    names: set[str] = set()
    for target in node.targets:
        elts = target.elts if isinstance(target, ast.Tuple | ast.List) else [target]
        names |= {e.id for e in elts if isinstance(e, ast.Name)}
    return names


def _is_peer_buffer(node: ast.AST) -> bool:
    """``x.get_buffer(p, ...)`` where p is not this rank."""
    return (isinstance(node, ast.Call) and _last(node.func) == "get_buffer" and bool(node.args)
            and not OWN_RANK.search(_text(node.args[0])))


def _python_one_shot(py: _Python, loop: ast.For | ast.AsyncFor | ast.comprehension,
                     ev: _Evidence) -> None:
    """A loop over every rank reading each peer's whole buffer (shape not divided per rank)."""
    if not (isinstance(loop.target, ast.Name) and WORLD_NAME.search(_text(loop.iter))):
        return
    var = loop.target.id
    scope: ast.AST = py.parents[loop] if isinstance(loop, ast.comprehension) else loop
    for node in ast.walk(scope):
        if not (_is_peer_buffer(node) and isinstance(node, ast.Call)
                and _text(node.args[0]) == var):
            continue
        written = (isinstance(py.parents.get(node), ast.Attribute)
                   and _last(py.parents[node]) == "copy_")
        sliced = any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.FloorDiv | ast.Div)
                     for a in node.args[1:] for n in ast.walk(a))
        if not written and not sliced and not SLICE_NAME.search(_text(node)):
            ev.add("one_shot", _line(loop, py))
            ev.add("one_shot", node.lineno)


# --- Triton kernels ----------------------------------------------------------------------------

def _triton(py: _Python, ev: _Evidence, sources: list[_Source]) -> None:
    for fn in py.jit:
        params = {a.arg for a in fn.args.args}
        peers = {p for p in params if PEER_NAME.search(p)}
        aranges: set[str] = set()
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign):
                names = {t.id for t in node.targets if isinstance(t, ast.Name)}
                if any(_last(n.func) == "pointer_type" for n in ast.walk(node.value)
                       if isinstance(n, ast.Call)):
                    peers |= names
                if any((isinstance(n, ast.Call) and _last(n.func) == "arange")
                       or (isinstance(n, ast.Name) and n.id in aranges)
                       for n in ast.walk(node.value)):
                    aranges |= names
        peer_lines: list[int] = []
        compute_lines: list[int] = []
        for node in ast.walk(fn):
            if not isinstance(node, ast.Call):
                continue
            name, short = py.dotted(node.func) or "", _last(node.func)
            if short in TRITON_BARRIER or (short.startswith("atomic_") and any(
                    k.arg == "scope" and isinstance(k.value, ast.Constant)
                    and k.value.value == "sys" for k in node.keywords)):
                ev.add("device_barrier", node.lineno)
            if name.startswith("triton.language") and short in TRITON_COMPUTE:
                compute_lines.append(node.lineno)
            pointer = node.args[0] if node.args else None
            if (short in ("load", "store") or short.startswith("atomic_")) and pointer is not None \
                    and name.startswith("triton.language") and _reads(pointer, peers):
                peer_lines.append(node.lineno)
                ev.add("sm_peer_ldst", node.lineno)
                if _strided(pointer, aranges):
                    ev.add("uncoalesced_peer", node.lineno)
        _triton_one_shot(fn, peers, ev)
        end = fn.end_lineno or fn.lineno
        peer_lines += [line for src in sources for line in src.peer_lines
                       if fn.lineno <= line <= end]
        if peer_lines and compute_lines:
            ev.add("fused_comm_compute", min(peer_lines))
            ev.add("fused_comm_compute", min(compute_lines))


def _strided(pointer: ast.AST, aranges: set[str]) -> bool:
    """``ptr + offs * stride``: an arange-derived offset multiplied by something other than 1."""
    for n in ast.walk(pointer):
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult):
            sides = (n.left, n.right)
            lane = [s for s in sides if (isinstance(s, ast.Name) and s.id in aranges)
                    or (isinstance(s, ast.Call) and _last(s.func) == "arange")]
            other = [s for s in sides if s not in lane]
            if lane and other and not (isinstance(other[0], ast.Constant)
                                       and other[0].value == 1):
                return True
    return False


def _triton_one_shot(fn: Function, peers: set[str], ev: _Evidence) -> None:
    for loop in ast.walk(fn):
        if not (isinstance(loop, ast.For) and WORLD_NAME.search(_text(loop.iter))):
            continue
        local = set(peers)
        for node in ast.walk(loop):
            if isinstance(node, ast.Assign) and _reads(node.value, local):
                local |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        for node in ast.walk(loop):
            # a data load through a peer pointer, not the pointer-table load ptrs + i
            if (isinstance(node, ast.Call) and _last(node.func) == "load" and node.args
                    and _reads(node.args[0], local) and not SLICE_NAME.search(_text(node))
                    and not _reads(node.args[0], {_last(loop.target)})):
                ev.add("one_shot", loop.lineno)
                ev.add("one_shot", node.lineno)


# --- device source (CUDA, PTX, ThunderKittens) -------------------------------------------------

@dataclass
class _Source:
    """A device-source string: ``code`` has comments and non-asm C strings blanked, ``shape``
    every string too (for bracket matching); positions map to file lines."""

    code: str
    shape: str
    first_line: int
    last_line: int
    exact: bool
    peer_lines: list[int] = field(default_factory=list)

    def line(self, pos: int) -> int:
        k = self.code.count("\n", 0, pos)
        return self.first_line + k if self.exact else min(self.first_line + k, self.last_line)


def _device_sources(py: _Python) -> list[_Source]:
    docstrings = {id(s.value) for node in ast.walk(py.tree) if isinstance(node, ast.Module
                  | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) for s in node.body
                  if isinstance(s, ast.Expr)}
    sunk: set[int] = set()
    sink_names: set[str] = set()
    for node in ast.walk(py.tree):
        if isinstance(node, ast.Call) and _last(node.func) in DEVICE_SINKS:
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                sunk |= {id(n) for n in ast.walk(arg)}
                sink_names |= {n.id for n in ast.walk(arg) if isinstance(n, ast.Name)}
    for node in ast.walk(py.tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in sink_names
                                                for t in node.targets):
            sunk |= {id(n) for n in ast.walk(node.value)}
    sources = []
    for node in ast.walk(py.tree):
        if id(node) in docstrings or isinstance(py.parents.get(node), ast.JoinedStr):
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        elif isinstance(node, ast.JoinedStr):
            text = "".join(str(v.value) if isinstance(v, ast.Constant) else "0"
                           for v in node.values)
        else:
            continue
        if id(node) in sunk or DEVICE_MARKER.search(text):
            code, shape = _strip_c(text)
            last = node.end_lineno or node.lineno
            sources.append(_Source(code, shape, node.lineno, last,
                                   last - node.lineno == text.count("\n")))
    return sources


ASM_START = re.compile(r"\basm\s*(?:volatile\s*|__volatile__\s*)?\(")


def _strip_c(text: str) -> tuple[str, str]:
    """Blank comments, then C strings outside asm(...); keep newlines so lines still map."""
    code = list(text)
    strings: list[tuple[int, int]] = []
    i, n = 0, len(text)

    def blank(chars: list[str], a: int, b: int) -> None:
        chars[a:b] = [c if c == "\n" else " " for c in chars[a:b]]

    while i < n:
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            blank(code, i, j)
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            blank(code, i, j)
        elif text[i] in "\"'":
            j = i + 1
            while j < n and text[j] not in (text[i], "\n"):
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            strings.append((i, j))
        else:
            j = i + 1
        i = j
    shape = list(code)
    for a, b in strings:
        blank(shape, a + 1, b - 1)
    shape_text = "".join(shape)
    asm = [(m.start(), _close(shape_text, m.end() - 1)) for m in ASM_START.finditer(shape_text)]
    for a, b in strings:
        if not any(s <= a <= e for s, e in asm):
            blank(code, a, b)
    return "".join(code), shape_text


def _close(text: str, at: int) -> int:
    """Index of the bracket closing the one at ``at`` (or the end)."""
    opener = text[at]
    closer = {"(": ")", "{": "}", "[": "]", "<": ">"}[opener]
    depth = 0
    for k in range(at, len(text)):
        depth += (text[k] == opener) - (text[k] == closer)
        if depth == 0:
            return k
    return len(text) - 1


def _c_patterns(src: _Source, ev: _Evidence) -> None:
    src.peer_lines.extend(src.line(m.start()) for m in C_PEER_MARKER.finditer(src.code))
    for name, pattern in C_MECHANISMS.items():
        for m in re.finditer(pattern, src.code):
            if name == "host_sync" and C_SETUP_FUNCTION.search(_c_enclosing(src, m.start())):
                continue  # a sync in one-time setup code (init_..., open_handles...)
            ev.add(name, src.line(m.start()))
    for m in re.finditer(r"<<<([^;]*?)>>>", src.code):
        sizes = [_c_literal(src, part.strip()) for part in _top_split(m.group(1))[:2]]
        blocks = sizes[0]
        if blocks is not None and blocks < MAX_CAPPED_GRID_BLOCKS and sizes[:2] != [1, 1]:
            ev.add("grid_capped", src.line(m.start()))


def _top_split(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for k, c in enumerate(text):
        depth += (c in "([{<") - (c in ")]}>")
        if c == "," and depth == 0:
            parts.append(text[start:k])
            start = k + 1
    return [*parts, text[start:]]


def _c_literal(src: _Source, expr: str, depth: int = 0) -> int | None:
    """An integer literal, ``dim3(a, b, c)`` of literals, or a name defined once as one."""
    if re.fullmatch(r"\d+[uUlL]*", expr):
        return int(re.sub(r"[uUlL]", "", expr))
    dim3 = re.fullmatch(r"dim3\s*\((.*)\)", expr)
    if dim3 and depth < 3:
        sizes = [_c_literal(src, p.strip(), depth + 1) for p in _top_split(dim3.group(1))]
        return math.prod(s for s in sizes if s is not None) if None not in sizes else None
    name = re.fullmatch(r"(?:\w+::)*(\w+)", expr)
    if name and depth < 3:
        word = re.escape(name.group(1))
        found = re.findall(rf"#define\s+{word}\s+(\S+)|\b{word}\s*(?:\{{|=(?!=))\s*([^;}}]+)",
                           src.code)
        values = [a or b for a, b in found]
        if len(values) == 1:
            return _c_literal(src, values[0].strip(), depth + 1)
    return None


def _c_enclosing(src: _Source, pos: int) -> str:
    """The name of the C++ function whose body holds ``pos`` ("" at top level)."""
    best, best_start = "", -1
    for m in re.finditer(r"\b(\w+)\s*\([^;{}]*\)\s*(?:const\s*)?(?:noexcept\s*)?\{", src.shape):
        if m.group(1) in C_NOT_FUNCTIONS:
            continue
        open_at = m.end() - 1
        if open_at < pos <= _close(src.shape, open_at) and open_at > best_start:
            best, best_start = m.group(1), open_at
    return best


@dataclass(frozen=True)
class _CKernel:
    """A ``__global__`` function, or a ThunderKittens ``kernel(const globals &G)``."""

    src: _Source
    name: str
    at: int
    params: tuple[tuple[str, str], ...]  # (type, name)
    body: tuple[int, int]
    tk: bool


def _c_kernels(src: _Source) -> list[_CKernel]:
    kernels = []
    heads = [(m.end(), False) for m in re.finditer(r"\b__global__\b", src.shape)]
    heads += [(m.start(1), True) for m in re.finditer(
        r"__device__[^;{}]*?\b(\w+)\s*\(\s*const\s+(?:\w+::)*globals\s*&", src.shape)]
    for head, tk in heads:
        name_m = next((m for m in re.finditer(r"\b(\w+)\s*\(", src.shape[head:])
                       if m.group(1) not in ("__launch_bounds__", "__align__")), None)
        if name_m is None:
            continue
        open_at = head + name_m.end() - 1
        close_at = _close(src.shape, open_at)
        brace = re.match(r"\s*(?:const\s*)?\{", src.shape[close_at + 1:])
        if brace is None:
            continue  # a declaration
        brace_at = close_at + brace.end()  # the "{" opening the body
        params = []
        for part in _top_split(src.shape[open_at + 1:close_at]):
            words = re.findall(r"[\w:]+|\*", part.split("=")[0])
            if len(words) >= 2 and words[-1] != "*":
                params.append((" ".join(words[:-1]), words[-1]))
        kernels.append(_CKernel(src, name_m.group(1), head + name_m.start(1), tuple(params),
                                (brace_at + 1, _close(src.shape, brace_at)), tk))
    return kernels


def _c_kernel(k: _CKernel, ev: _Evidence) -> None:
    """Peer loads/stores, fused compute, one-shot loops and uncoalesced peer access in one
    kernel body. Peer pointers: parameters named peer/remote/ptrs/bufs... or pointer arrays;
    multimem, ``.mc_ptr``, ``G.x[...]`` (a pgl) and nvshmem puts/gets are peer accesses too."""
    src, (a, b) = k.src, k.body
    body = src.code[a:b]
    peers = {name for typ, name in k.params if PEER_NAME.search(name) or typ.count("*") >= 2}
    direct = [m.start() for p in peers
              for m in re.finditer(rf"\b{p}\s*\[|\*\s*\(?\s*{p}\b", body)]
    for pos in direct:
        ev.add("sm_peer_ldst", src.line(a + pos))
    access = sorted(direct + [m.start() for m in C_PEER_MARKER.finditer(body)])
    src.peer_lines.extend(src.line(a + pos) for pos in access)
    compute = C_COMPUTE.search(body)
    if access and compute:
        ev.add("fused_comm_compute", src.line(a + access[0]))
        ev.add("fused_comm_compute", src.line(a + compute.start()))
    _c_one_shot(k, peers, ev)
    _c_uncoalesced(k, peers, ev)


def _c_one_shot(k: _CKernel, peers: set[str], ev: _Evidence) -> None:
    src, (a, b) = k.src, k.body
    for loop in re.finditer(r"\bfor\s*\(", src.shape[a:b]):
        open_at = a + loop.end() - 1
        close_at = _close(src.shape, open_at)
        header = src.code[open_at + 1:close_at].split(";")
        var = re.search(r"(\w+)\s*=", header[0])
        if var is None or len(header) < 2 or not WORLD_NAME.search(header[1]):
            continue
        rest = src.shape[close_at + 1:]
        brace = re.match(r"\s*\{", rest)
        end = (_close(src.shape, close_at + brace.end()) if brace
               else close_at + 1 + rest.find(";"))
        inner = src.code[close_at + 1:end]
        for m in re.finditer(rf"(\bG\.)?\b(\w+)\s*\[\s*{var.group(1)}\s*\]", inner):
            after = inner[m.end():]
            index = re.match(r"\s*\[([^\]]*)\]", after)
            tail = after[index.end():] if index else after
            written = re.match(r"\s*=[^=]", tail) is not None
            if (m.group(1) or m.group(2) in peers) and not written \
                    and not SLICE_NAME.search(inner):
                ev.add("one_shot", src.line(open_at))
                ev.add("one_shot", src.line(close_at + 1 + m.start()))


def _c_uncoalesced(k: _CKernel, peers: set[str], ev: _Evidence) -> None:
    src, (a, b) = k.src, k.body
    body = src.code[a:b]
    types = dict((name, typ) for typ, name in k.params)
    for p in sorted(peers):
        element = re.sub(r"\b(?:const|volatile|__restrict__|__restrict)\b|\*", " ", types[p])
        small = " ".join(element.split()) in C_SMALL_TYPES
        vector = re.search(rf"reinterpret_cast\s*<[^>]*\d\s*\*\s*>\s*\(\s*{p}\b"
                           rf"|\(\s*\w+\d\s*\*\s*\)\s*{p}\b", body)
        for m in re.finditer(rf"\b{p}\s*\[([^\]]*)\](?:\s*\[([^\]]*)\])?", body):
            index = m.group(2) or m.group(1)
            if (small and not vector) or C_STRIDED.search(index):
                ev.add("uncoalesced_peer", src.line(a + m.start()))


def _count_kernels(py: _Python, sources: list[_Source], kernels: list[_CKernel],
                   ev: _Evidence) -> int:
    """Distinct __global__ functions, ThunderKittens launch_kernel<.., .., K> kernels, Triton
    @jit functions not called from another @jit function, cupy Elementwise/Reduction kernels."""
    names: dict[str, int] = {}
    for k in kernels:
        if not k.tk:  # ThunderKittens kernels are counted at their launch_kernel<...>
            names.setdefault(k.name, k.src.line(k.at))
    for src in sources:
        for m in re.finditer(r"\blaunch_kernel\s*<", src.shape):
            args = _top_split(src.shape[m.end():_close(src.shape, m.end() - 1)])
            kernel = re.sub(r"<.*", "", "".join(args[-1].split()))  # kernel<0, 1> is kernel
            names.setdefault(kernel, src.line(m.start()))
    called = {_last(n.func) for fn in py.jit for n in ast.walk(fn) if isinstance(n, ast.Call)}
    for fn in py.jit:
        if fn.name not in called:
            names.setdefault(f"triton:{fn.name}", fn.lineno)
    for node in ast.walk(py.tree):
        if isinstance(node, ast.Call) and _last(node.func) in ("ElementwiseKernel",
                                                               "ReductionKernel"):
            names.setdefault(f"cupy:{node.lineno}", node.lineno)
    for line in names.values():
        ev.add("custom_kernels", line)
    return len(names)


