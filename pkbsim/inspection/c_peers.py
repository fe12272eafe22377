"""Peer pointers inside C++ that Python compiles and calls (issue 32).

A ``cudaMemcpy[2D][Async]`` or ``cuMemcpyDtoD[Async]`` in C++ source (``load_inline``,
``cpp_extension``) is a copy-engine peer copy when its destination or source is a peer
pointer there (tests/data/inspect_eval/README.md, "Copies inside C++"):

- a parameter of the C++ function that Python passes a peer pointer or a tensor on a peer
  (``_ext.fn(hdl.buffer_ptrs[peer], ...)``: the Python call's arguments, read by the file's
  peer taint, matched to the function's parameters by position); a parameter passed every
  rank's pointers (a pointer table) gives a peer when indexed by anything but this rank's
  number (``ptrs[(rank + 1) % world]``, ``ptrs[r]`` in a loop; not ``ptrs[rank]``);
- whatever C++ computes from one (``char* p = (char*)peer + off``), passes to another C++
  function of the source, or opens with ``cudaIpcOpenMemHandle(&p, ...)``.

A function no Python call of this file reaches keeps the names of its parameters as their
word: one saying peer or remote is a peer pointer (a table when it is a vector, an array or
a plural such as ``peer_ptrs``). Sizes read off a peer (``peer.numel()``) are not pointers.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from pkbsim.inspection.c_index import NAME_CALL, TextIndex, function_heads
from pkbsim.inspection.device_source import DeviceSource
from pkbsim.inspection.patterns import OWN_RANK, STRICT_PEER_NAME, WORLD_NAME
from pkbsim.inspection.python_model import Function, PythonModel, unparse

NONE, TABLE, PEER = 0, 1, 2  # as pkbsim.inspection.call_sites: nothing, every rank's, a peer's
COPY_OPERANDS = {"cudaMemcpy2D": (0, 2), "cudaMemcpy2DAsync": (0, 2)}  # else (dst, src) = (0, 1)
IPC_OPEN = re.compile(r"\b(?:cudaIpcOpenMemHandle|cuIpcOpenMemHandle(?:_v2)?)\s*\(")
ASSIGN = re.compile(r"\b([A-Za-z_]\w*)\s*(\[[^\]\n]{0,200}\])?\s*=(?!=)")
IDENT = re.compile(r"(?<![\w.>])([A-Za-z_]\w*)\b")
OWN_C = re.compile(r"(?i)^(?:my_|local_|own_|this_|self_)?rank(?:_id)?$|^me$")
CASTS = re.compile(r"\(\s*(?:const\s+)?\w+(?:::\w+)*\s*\**\s*\)|\b(?:static|reinterpret|const)_cast"
                   r"\s*<[^<>]{0,100}>|[()&\s]")
POINTER_MEMBERS = {"data_ptr", "data", "const_data_ptr", "mutable_data_ptr"}
MAX_ROUNDS = 8
KindOf = Callable[[ast.expr, "Function | None"], int]  # the Python taint's kind of a value


@dataclass
class _CFunction:
    src: DeviceSource
    name: str
    params: list[str]
    types: list[str]
    body: tuple[int, int]  # positions in src.code: after "{" .. its "}"
    kinds: dict[int, int] = field(default_factory=dict)  # parameter index -> NONE/TABLE/PEER
    own: set[int] = field(default_factory=set)  # parameters given this rank's number
    reached: bool = False  # a call (Python or C++) gives its parameters their kinds


@dataclass
class _Taint:
    peers: set[str] = field(default_factory=set)  # peer pointers (or tensors on a peer)
    tables: set[str] = field(default_factory=set)  # every rank's pointers: [other rank] is one
    peer_tables: set[str] = field(default_factory=set)  # only peers' pointers: any entry is one
    own: set[str] = field(default_factory=set)  # this rank's number


class CPeers:
    """The peer pointers of a file's C++ functions, from the Python calls of their bindings."""

    def __init__(self, py: PythonModel, sources: list[DeviceSource], kind_of: KindOf) -> None:
        self.functions: dict[str, list[_CFunction]] = {}
        for src in sources:
            for name, paren, brace in function_heads(src.shape_index):
                close = src.close(paren)
                params, types = _parameters(src.shape[paren + 1:close])
                self.functions.setdefault(name, []).append(
                    _CFunction(src, name, params, types, (brace + 1, src.close(brace))))
        self.opened = {n for src in sources for n in _ipc_opened(src.code)[0]}
        self.opened_tables = {n for src in sources for n in _ipc_opened(src.code)[1]}
        bindings: dict[str, set[str]] = {}  # C++ function -> the Python names calling it
        for src in sources:
            for m in re.finditer(r'\.def\(\s*"(\w+)"\s*,\s*&?\s*(\w+)', src.text):
                bindings.setdefault(m.group(2), set()).add(m.group(1))
        self._python_calls(py, bindings, kind_of)
        self.taints: dict[int, _Taint] = {}
        for _ in range(MAX_ROUNDS):
            if not self._round():
                break

    def _python_calls(self, py: PythonModel, bindings: dict[str, set[str]],
                      kind_of: KindOf) -> None:
        by_python: dict[str, list[_CFunction]] = {}
        for name, fns in self.functions.items():
            for python_name in {name} | bindings.get(name, set()):
                by_python.setdefault(python_name, []).extend(fns)
        for node in py.all_nodes:
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in by_python):
                continue
            fn = py.scope_of(node)
            for f in by_python[node.func.attr]:
                f.reached = True
                for i, arg in enumerate(node.args):
                    if isinstance(arg, ast.Starred):
                        break
                    kind = kind_of(arg, fn)
                    f.kinds[i] = max(f.kinds.get(i, NONE), kind)
                    if OWN_RANK.search(unparse(arg)):
                        f.own.add(i)

    def _round(self) -> bool:
        """Each function's taint from its parameters' kinds, then the kinds it passes to
        the C++ functions it calls; True when a parameter's kind grew."""
        changed = False
        for fns in self.functions.values():
            for f in fns:
                taint = self._taint(f)
                self.taints[id(f)] = taint
                changed |= self._pass_on(f, taint)
        return changed

    def _taint(self, f: _CFunction) -> _Taint:
        t = _Taint(set(self.opened), set(), set(self.opened_tables),
                   {p for p in f.params if OWN_C.match(p)})
        for i, name in enumerate(f.params):
            kind = f.kinds.get(i, NONE) if f.reached else _named(name, f.types[i])
            if kind == PEER:
                t.peers.add(name)
            elif kind == TABLE:
                t.tables.add(name)
            if i in f.own:
                t.own.add(name)
        body = f.src.code[f.body[0]:f.body[1]]
        opened, opened_tables = _ipc_opened(body)
        t.peers |= opened
        t.peer_tables |= opened_tables
        index = TextIndex(body)
        for _ in range(MAX_ROUNDS):
            before = (len(t.peers), len(t.tables), len(t.peer_tables), len(t.own))
            for m in ASSIGN.finditer(body):
                end = index.next(";", m.end())
                rhs = body[m.end():end if end >= 0 else len(body)]
                lhs = m.group(1)
                if m.group(2):  # h[i] = ptrs[i]: a copy of a table; h[r] = opened: peers'
                    if _indexes_table(rhs, t):
                        t.tables.add(lhs)
                    elif _peer(rhs, t):
                        t.peer_tables.add(lhs)
                elif _peer(rhs, t):
                    t.peers.add(lhs)
                elif _table(rhs, t):
                    t.tables.add(lhs)
                elif CASTS.sub("", rhs) in t.own:
                    t.own.add(lhs)
            if before == (len(t.peers), len(t.tables), len(t.peer_tables), len(t.own)):
                break
        return t

    def _pass_on(self, f: _CFunction, t: _Taint) -> bool:
        changed = False
        body = f.src.shape[f.body[0]:f.body[1]]
        code = f.src.code[f.body[0]:f.body[1]]
        for m in NAME_CALL.finditer(body):
            callees = [g for g in self.functions.get(m.group(1), []) if g is not f]
            if not callees:
                continue
            close = f.src.close(f.body[0] + m.end() - 1) - f.body[0]
            args = _split(code[m.end():close])
            for g in callees:
                if not g.reached:  # its parameters' names no longer decide: read it again
                    g.reached = changed = True
                for i, arg in enumerate(args):
                    kind = PEER if _peer(arg, t) else TABLE if _table(arg, t) else NONE
                    if kind > g.kinds.get(i, NONE):
                        g.kinds[i] = kind
                        changed = True
                    if CASTS.sub("", arg) in t.own and i not in g.own:
                        g.own.add(i)
                        changed = True
        return changed

    def copy(self, src: DeviceSource, match: re.Match[str]) -> bool:
        """Does the memcpy whose name ``match`` found copy to or from a peer pointer?"""
        f = self._enclosing(src, match.start())
        taint = self.taints.get(id(f)) if f is not None else _Taint(
            set(self.opened), set(), set(self.opened_tables), set())
        if taint is None:
            return False
        close = src.close(match.end() - 1)
        args = _split(src.code[match.end():close])
        dst, source = COPY_OPERANDS.get(match.group(1), (0, 1))
        return any(_peer(args[i], taint) for i in (dst, source) if i < len(args))

    def _enclosing(self, src: DeviceSource, pos: int) -> _CFunction | None:
        name = src.enclosing(pos)
        return next((f for f in self.functions.get(name, []) if f.src is src
                     and f.body[0] <= pos <= f.body[1]), None)


def _parameters(text: str) -> tuple[list[str], list[str]]:
    """Parameter names and types of a C++ parameter list (defaults dropped)."""
    names, types = [], []
    for part in _split(text):
        words = re.findall(r"[\w:]+|[*&\[]", part.split("=")[0])
        idents = [i for i, w in enumerate(words) if re.fullmatch(r"[A-Za-z_]\w*", w)]
        if len(words) < 2 or not idents:
            continue
        at = idents[-1]
        names.append(words[at])
        types.append(" ".join(words[:at] + words[at + 1:]))
    return names, types


def _named(name: str, typ: str) -> int:
    """A parameter no call reaches: its name says peer or remote (a table when a vector, an
    array or plural), or nothing."""
    if not STRICT_PEER_NAME.search(name) or WORLD_NAME.search(name):
        return NONE
    if "vector" in typ or "**" in typ.replace(" ", "") or "[" in typ or name.endswith("s"):
        return TABLE
    return PEER


def _ipc_opened(code: str) -> tuple[set[str], set[str]]:
    """Names given a pointer by ``cudaIpcOpenMemHandle(&p, ...)`` (``&t[i]``: a table)."""
    peers: set[str] = set()
    tables: set[str] = set()
    for m in IPC_OPEN.finditer(code):
        first = _split(code[m.end():_close_paren(code, m.end() - 1)])[:1]
        if not first:
            continue
        target = re.search(r"&\s*\(?\s*([A-Za-z_]\w*)\s*(\[)?", first[0])
        if target is not None:
            (tables if target.group(2) else peers).add(target.group(1))
    return peers, tables


def _peer(text: str, t: _Taint) -> bool:
    """Does this C++ expression give a peer pointer (or a tensor on a peer)?"""
    for m in IDENT.finditer(text):
        name = m.group(1)
        rest = text[m.end():]
        member = re.match(r"\s*(?:\.|->)\s*(\w+)", rest)
        if name in t.peers:
            if member is None or member.group(1) in POINTER_MEMBERS:
                return True
            continue
        indexed = re.match(r"\s*\[", rest)
        if indexed is None:
            continue
        if name in t.peer_tables:
            return True
        if name in t.tables:
            close = _close_bracket(rest, indexed.end() - 1)
            index = CASTS.sub("", rest[indexed.end():close])
            if index not in t.own and not OWN_C.match(index):
                return True
    return False


def _indexes_table(text: str, t: _Taint) -> bool:
    """Does this expression read an element of a pointer table (``ptrs[i]``)?"""
    return any(m.group(1) in t.tables and re.match(r"\s*\[", text[m.end():])
               for m in IDENT.finditer(text))


def _table(text: str, t: _Taint) -> bool:
    """Does this expression give a pointer table itself (``ptrs``, ``ptrs.data()``)?"""
    for m in IDENT.finditer(text):
        if m.group(1) in t.tables and not re.match(r"\s*\[", text[m.end():]):
            member = re.match(r"\s*(?:\.|->)\s*(\w+)", text[m.end():])
            if member is None or member.group(1) in POINTER_MEMBERS:
                return True
    return False


def _split(text: str) -> list[str]:
    """Top-level comma-separated parts of an argument or parameter list."""
    parts, depth, start = [], 0, 0
    for k, c in enumerate(text):
        depth += (c in "([{<") - (c in ")]}>")
        if c == "," and depth <= 0:
            parts.append(text[start:k])
            start = k + 1
    tail = text[start:]
    return [*parts, tail] if tail.strip() or parts else []


def _close_paren(text: str, at: int) -> int:
    depth = 0
    for k in range(at, len(text)):
        depth += (text[k] == "(") - (text[k] == ")")
        if depth == 0:
            return k
    return len(text)


def _close_bracket(text: str, at: int) -> int:
    depth = 0
    for k in range(at, len(text)):
        depth += (text[k] == "[") - (text[k] == "]")
        if depth == 0:
            return k
    return len(text)
