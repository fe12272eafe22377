"""Device source (CUDA, PTX, ThunderKittens) held in Python string literals: finding it, blanking
its comments and C strings, reading its mechanisms, kernels and launches; and the kernel count."""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass, field

from pkbsim.inspection.evidence import EvidenceLog
from pkbsim.inspection.patterns import (
    C_COMPUTE,
    C_MECHANISMS,
    C_NOT_FUNCTIONS,
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


def c_patterns(src: DeviceSource, ev: EvidenceLog) -> None:
    src.peer_lines.extend(src.line(m.start()) for m in C_PEER_MARKER.finditer(src.code))
    for name, pattern in C_MECHANISMS.items():
        for m in re.finditer(pattern, src.code):
            if name == "host_sync" and C_SETUP_FUNCTION.search(c_enclosing(src, m.start())):
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
        word = re.escape(name.group(1))
        found = re.findall(rf"#define\s+{word}\s+(\S+)|\b{word}\s*(?:\{{|=(?!=))\s*([^;}}]+)",
                           src.code)
        values = [a or b for a, b in found]
        if len(values) == 1:
            return _c_literal(src, values[0].strip(), depth + 1)
    return None


def c_enclosing(src: DeviceSource, pos: int) -> str:
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
class CKernel:
    """A ``__global__`` function, or a ThunderKittens ``kernel(const globals &G)``."""

    src: DeviceSource
    name: str
    at: int
    params: tuple[tuple[str, str], ...]  # (type, name)
    body: tuple[int, int]
    tk: bool


def c_kernels(src: DeviceSource) -> list[CKernel]:
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
        kernels.append(CKernel(src, name_m.group(1), head + name_m.start(1), tuple(params),
                               (brace_at + 1, _close(src.shape, brace_at)), tk))
    return kernels


def c_kernel_flags(k: CKernel, ev: EvidenceLog) -> None:
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


def _c_one_shot(k: CKernel, peers: set[str], ev: EvidenceLog) -> None:
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


def _c_uncoalesced(k: CKernel, peers: set[str], ev: EvidenceLog) -> None:
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


def count_kernels(py: PythonModel, sources: list[DeviceSource], kernels: list[CKernel],
                   ev: EvidenceLog) -> int:
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
