"""Device source (CUDA, PTX, ThunderKittens) held in Python string literals: finding it, blanking
its comments and C strings, reading its mechanisms, kernels and launches; and the kernel count."""

from __future__ import annotations

import ast
import bisect
import math
import re
from dataclasses import dataclass, field
from functools import cached_property

from pkbsim.inspection.c_index import (
    NAME_CALL,
    TextIndex,
    bracket_pairs,
    definitions,
    function_map,
    launches,
    tk_heads,
)
from pkbsim.inspection.evidence import EvidenceLog
from pkbsim.inspection.patterns import (
    C_COMPUTE,
    C_MECHANISMS,
    C_PEER_MARKER,
    C_SETUP_FUNCTION,
    C_SMALL_TYPES,
    C_STRIDED,
    DEVICE_MARKER,
    DEVICE_SINKS,
    MAX_CAPPED_GRID_BLOCKS,
    PEER_NAME,
    SLICE_NAME,
    WORLD_NAME,
)
from pkbsim.inspection.python_model import PythonModel, last_name


@dataclass
class DeviceSource:
    """A device-source string: ``code`` has comments and non-asm C strings blanked, ``shape``
    every string too (for bracket matching); positions map to file lines. Lines, brackets,
    definitions and enclosing functions come from tables built once (``c_index``), so reading
    a file stays linear in its size."""

    code: str
    shape: str
    first_line: int
    last_line: int
    exact: bool
    peer_lines: list[int] = field(default_factory=list)
    text: str = ""  # the string as written (C strings kept: pybind11's .def("name", &f))

    @cached_property
    def code_index(self) -> TextIndex:
        return TextIndex(self.code)

    @cached_property
    def shape_index(self) -> TextIndex:
        return TextIndex(self.shape)

    @cached_property
    def _functions(self) -> tuple[list[int], list[str]]:
        return function_map(self.shape_index)

    @cached_property
    def definitions(self) -> dict[str, list[str]]:
        return definitions(self.code_index)

    def line(self, pos: int) -> int:
        k = self.code_index.count("\n", pos)  # newlines before pos
        return self.first_line + k if self.exact else min(self.first_line + k, self.last_line)

    def close(self, at: int) -> int:
        """Index in ``shape`` of the bracket closing the one at ``at`` (or the end)."""
        return self.shape_index.close(at)

    def enclosing(self, pos: int) -> str:
        """The name of the C++ function whose body holds ``pos`` ("" at top level)."""
        starts, names = self._functions
        k = bisect.bisect_right(starts, pos) - 1
        return names[k] if k >= 0 else ""


_C_BODY_OPEN = re.compile(r"\s*(?:const\s*)?\{")
_OPEN_BRACE = re.compile(r"\s*\{")
_FOR = re.compile(r"\bfor\s*\(")
_INDEX = re.compile(r"\s*\[([^\]]*)\]")
_ASSIGN = re.compile(r"\s*=[^=]")
_NAME_INDEX = re.compile(r"\b(\w+)\s*\[")
_NEXT_INDEX = re.compile(r"\s*\[")
_DEREF = re.compile(r"\*\s*\(?\s*(\w+)\b")
# a cast to a vector type, reinterpret_cast<int4*>(p) or (float4*) p; a template argument of
# more than 200 characters is not one
_VECTOR_CAST = re.compile(r"(?=reinterpret_cast\s*<[^>]{0,200}?\d\s*\*\s*>\s*\(\s*(\w+)\b"
                          r"|\(\s*\w+\d\s*\*\s*\)\s*(\w+)\b)")
MAX_LOOP_NESTING = 8
MAX_INDEX_CHARS = 1000  # an index longer than this is not read


def device_sources(py: PythonModel) -> list[DeviceSource]:
    docstrings = {id(s.value) for node in py.all_nodes if isinstance(node, ast.Module
                  | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) for s in node.body
                  if isinstance(s, ast.Expr)}
    sunk: set[int] = set()
    sink_names: set[str] = set()
    for node in py.all_nodes:
        if isinstance(node, ast.Call) and last_name(node.func) in DEVICE_SINKS:
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                sunk |= {id(n) for n in ast.walk(arg)}
                sink_names |= {n.id for n in ast.walk(arg) if isinstance(n, ast.Name)}
    for node in py.all_nodes:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in sink_names
                                                for t in node.targets):
            sunk |= {id(n) for n in ast.walk(node.value)}
    sources = []
    for node in py.all_nodes:
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
            sources.append(DeviceSource(code, shape, node.lineno, last,
                                        last - node.lineno == text.count("\n"), text=text))
    return sources


_C_SPECIAL = re.compile(r"//|/\*|[\"']")
_C_STRING = {q: re.compile(rf"(?:[^{q}\\\n]|\\[\s\S])*") for q in "\"'"}
ASM_START = re.compile(r"\basm\s*(?:volatile\s*|__volatile__\s*)?\(")


def _strip_c(text: str) -> tuple[str, str]:
    """Blank comments, then C strings outside asm(...); keep newlines so lines still map."""
    code = list(text)
    strings: list[tuple[int, int]] = []
    i, n = 0, len(text)

    def blank(chars: list[str], a: int, b: int) -> None:
        chars[a:b] = [c if c == "\n" else " " for c in chars[a:b]]

    while (found := _C_SPECIAL.search(text, i)) is not None:
        i = found.start()
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            blank(code, i, j)
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            blank(code, i, j)
        else:  # a C string or character: to its closing quote or the end of the line
            body = _C_STRING[text[i]].match(text, i + 1)
            j = min(body.end() + 1, n) if body is not None else n
            strings.append((i, j))
        i = j
    shape = list(code)
    for a, b in strings:
        blank(shape, a + 1, b - 1)
    shape_text = "".join(shape)
    parens = bracket_pairs(shape_text, "(")
    starts: list[int] = []  # asm(...) spans, merged where they overlap
    ends: list[int] = []
    for m in ASM_START.finditer(shape_text):
        start, end = m.start(), parens.get(m.end() - 1, n - 1)
        if ends and start <= ends[-1]:
            ends[-1] = max(ends[-1], end)
        else:
            starts.append(start)
            ends.append(end)
    for a, b in strings:
        k = bisect.bisect_right(starts, a) - 1
        if k < 0 or a > ends[k]:
            blank(code, a, b)
    return "".join(code), shape_text


def c_patterns(src: DeviceSource, ev: EvidenceLog) -> None:
    src.peer_lines.extend(src.line(m.start()) for m in C_PEER_MARKER.finditer(src.code))
    for name, pattern in C_MECHANISMS.items():
        for m in re.finditer(pattern, src.code):
            if name == "host_sync" and C_SETUP_FUNCTION.search(src.enclosing(m.start())):
                continue  # a sync in one-time setup code (init_..., open_handles...)
            ev.add(name, src.line(m.start()))
    for at, config in launches(src.code_index):
        sizes = [_c_literal(src, part.strip()) for part in _top_split(config)[:2]]
        blocks = sizes[0]
        if blocks is not None and blocks < MAX_CAPPED_GRID_BLOCKS and sizes[:2] != [1, 1]:
            ev.add("grid_capped", src.line(at))


def _top_split(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for k, c in enumerate(text):
        depth += (c in "([{<") - (c in ")]}>")
        if c == "," and depth == 0:
            parts.append(text[start:k])
            start = k + 1
    return [*parts, text[start:]]


def _c_literal(src: DeviceSource, expr: str, depth: int = 0) -> int | None:
    """An integer literal, ``dim3(a, b, c)`` of literals, or a name defined once as one."""
    if re.fullmatch(r"\d{1,18}[uUlL]*", expr):  # longer: no launch size
        return int(re.sub(r"[uUlL]", "", expr))
    dim3 = re.fullmatch(r"dim3\s*\((.*)\)", expr)
    if dim3 and depth < 3:
        sizes = [_c_literal(src, p.strip(), depth + 1) for p in _top_split(dim3.group(1))]
        return math.prod(s for s in sizes if s is not None) if None not in sizes else None
    name = re.fullmatch(r"(?:\w+::)*(\w+)", expr)
    if name and depth < 3:
        values = src.definitions.get(name.group(1), [])
        if len(values) == 1:
            return _c_literal(src, values[0].strip(), depth + 1)
    return None


@dataclass(frozen=True)
class CKernel:
    """A ``__global__`` function, or a ThunderKittens ``kernel(const globals &G)``."""

    src: DeviceSource
    name: str
    at: int
    params: tuple[tuple[str, str], ...]  # (type, name)
    body: tuple[int, int]
    tk: bool


def c_kernels(src: DeviceSource) -> list[CKernel]:
    """Every kernel defined in ``src``, in order. A head inside the kernel before it (its
    parameters or body) is skipped: C++ has no nested functions, and skipping keeps the
    bodies disjoint, so reading them stays linear in the source."""
    kernels: list[CKernel] = []
    heads = [(m.end(), False) for m in re.finditer(r"\b__global__\b", src.shape)]
    heads += [(at, True) for at in tk_heads(src.shape_index)]
    if not heads:
        return kernels
    calls = [m for m in NAME_CALL.finditer(src.shape)
             if m.group(1) not in ("__launch_bounds__", "__align__")]
    call_starts = [m.start() for m in calls]
    covered = -1  # the end of the last kernel's body
    for head, tk in sorted(heads):
        if head <= covered:
            continue
        k = bisect.bisect_left(call_starts, head)
        if k == len(calls):
            continue
        name_m = calls[k]
        open_at = name_m.end() - 1
        close_at = src.close(open_at)
        brace = _C_BODY_OPEN.match(src.shape, close_at + 1)
        if brace is None:
            continue  # a declaration
        brace_at = brace.end() - 1  # the "{" opening the body
        params = []
        for part in _top_split(src.shape[open_at + 1:close_at]):
            words = re.findall(r"[\w:]+|\*", part.split("=")[0])
            if len(words) >= 2 and words[-1] != "*":
                params.append((" ".join(words[:-1]), words[-1]))
        covered = src.close(brace_at)
        kernels.append(CKernel(src, name_m.group(1), name_m.start(1), tuple(params),
                               (brace_at + 1, covered), tk))
    return kernels


def c_kernel_flags(k: CKernel, ev: EvidenceLog) -> None:
    """Peer loads/stores, fused compute, one-shot loops and uncoalesced peer access in one
    kernel body. Peer pointers: parameters named peer/remote/ptrs/bufs... or pointer arrays;
    multimem, ``.mc_ptr``, ``G.x[...]`` (a pgl) and nvshmem puts/gets are peer accesses too."""
    src, (a, b) = k.src, k.body
    body = src.code[a:b]
    peers = {name for typ, name in k.params if PEER_NAME.search(name) or typ.count("*") >= 2}
    direct = _peer_refs(body, peers) if peers else []
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


def _c_one_shot(k: CKernel, peers: set[str], ev: EvidenceLog) -> None:
    """A loop over the world's ranks reading a peer's buffer whole, unsliced. Loops nested
    more than MAX_LOOP_NESTING deep are not read (no kernel nests so many; an unclosed ``for
    (`` repeated would otherwise cost the square of its count)."""
    src, (a, b) = k.src, k.body
    enclosing: list[int] = []  # where the loops around this one end
    for loop in _FOR.finditer(src.shape, a, b):
        open_at = loop.end() - 1
        close_at = src.close(open_at)
        brace = _OPEN_BRACE.match(src.shape, close_at + 1)
        semicolon = src.shape_index.next(";", close_at + 1)
        end = (src.close(brace.end() - 1) if brace
               else close_at if semicolon < 0 else semicolon)
        while enclosing and enclosing[-1] < open_at:
            enclosing.pop()
        enclosing.append(end)
        if len(enclosing) > MAX_LOOP_NESTING:
            continue
        header = src.code[open_at + 1:close_at].split(";")
        var = re.search(r"(\w+)\s*=", header[0])
        if var is None or len(header) < 2 or not WORLD_NAME.search(header[1]):
            continue
        inner = src.code[close_at + 1:end]
        if SLICE_NAME.search(inner):
            continue
        for m in re.finditer(rf"(\bG\.)?\b(\w+)\s*\[\s*{var.group(1)}\s*\]", inner):
            index = _INDEX.match(inner, m.end())
            written = _ASSIGN.match(inner, index.end() if index else m.end()) is not None
            if (m.group(1) or m.group(2) in peers) and not written:
                ev.add("one_shot", src.line(open_at))
                ev.add("one_shot", src.line(close_at + 1 + m.start()))


def _c_uncoalesced(k: CKernel, peers: set[str], ev: EvidenceLog) -> None:
    """Byte-wide or strided reads of a peer's buffer: ``P[i]`` with P a small type not cast to
    a vector type, or an index that strides by the thread."""
    if not peers:
        return
    src, (a, b) = k.src, k.body
    body = src.code[a:b]
    brackets = TextIndex(body)
    types = dict((name, typ) for typ, name in k.params)
    vector = {m.group(1) or m.group(2) for m in _VECTOR_CAST.finditer(body)}
    small = {}
    for p in peers:
        element = re.sub(r"\b(?:const|volatile|__restrict__|__restrict)\b|\*", " ", types[p])
        small[p] = " ".join(element.split()) in C_SMALL_TYPES and p not in vector
    # \bP\s*\[([^\]]*)\](?:\s*\[([^\]]*)\])? for every peer P in one pass
    resume = dict.fromkeys(peers, 0)
    for m in _NAME_INDEX.finditer(body):
        p = m.group(1)
        if p not in peers or m.start() < resume[p]:
            continue
        close = brackets.next(r"\]", m.end())
        if close < 0 or close - m.end() > MAX_INDEX_CHARS:
            continue
        index, end = body[m.end():close], close + 1
        second = _NEXT_INDEX.match(body, end)
        if second is not None:
            close = brackets.next(r"\]", second.end())
            if close >= 0 and close - second.end() <= MAX_INDEX_CHARS:
                index, end = body[second.end():close] or index, close + 1
        resume[p] = end
        if small[p] or C_STRIDED.search(index):
            ev.add("uncoalesced_peer", src.line(a + m.start()))


def _peer_refs(body: str, peers: set[str]) -> list[int]:
    r"""Where ``\bP\s*\[|\*\s*\(?\s*P\b`` matches for each peer P, as ``re.finditer`` finds
    them, for all peers in one pass: a match of P hides P's matches inside it."""
    refs = [(m.start(), m.end(), m.group(1)) for pattern in (_NAME_INDEX, _DEREF)
            for m in pattern.finditer(body) if m.group(1) in peers]
    found, resume = [], dict.fromkeys(peers, 0)
    for start, end, name in sorted(refs):
        if start >= resume[name]:
            found.append(start)
            resume[name] = end
    return found


def count_kernels(py: PythonModel, sources: list[DeviceSource], kernels: list[CKernel],
                   ev: EvidenceLog) -> int:
    """Distinct __global__ functions, ThunderKittens launch_kernel<.., .., K> kernels, Triton
    @jit functions not called from another @jit function, cupy Elementwise/Reduction kernels."""
    names: dict[str, int] = {}
    for k in kernels:
        if not k.tk:  # ThunderKittens kernels are counted at their launch_kernel<...>
            names.setdefault(k.name, k.src.line(k.at))
    for src in sources:
        covered = -1  # a launch_kernel<...> inside another's arguments is not read again
        for m in re.finditer(r"\blaunch_kernel\s*<", src.shape):
            if m.start() <= covered:
                continue
            covered = src.close(m.end() - 1)
            args = _top_split(src.shape[m.end():covered])
            kernel = re.sub(r"<.*", "", "".join(args[-1].split()))  # kernel<0, 1> is kernel
            names.setdefault(kernel, src.line(m.start()))
    called = {last_name(n.func) for fn in py.jit for n in ast.walk(fn) if isinstance(n, ast.Call)}
    for fn in py.jit:
        if fn.name not in called:
            names.setdefault(f"triton:{fn.name}", fn.lineno)
    for node in py.all_nodes:
        if isinstance(node, ast.Call) and last_name(node.func) in ("ElementwiseKernel",
                                                                   "ReductionKernel"):
            names.setdefault(f"cupy:{node.lineno}", node.lineno)
    for line in names.values():
        ev.add("custom_kernels", line)
    return len(names)
