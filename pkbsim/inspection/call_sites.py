"""Call sites that move or set up the task's data between GPUs, each placed on the profile's path.

Kinds: ``nccl_payload`` (a torch.distributed data collective or send/recv), ``nccl_metadata``
(barriers, object collectives, groups, and collectives whose sent tensor the size rule bounds:
pkbsim/inspection/sizes.py), ``copy_engine`` (a peer copy: ``cudaMemcpyPeer*`` however it is
reached, or a memcpy/``copy_``/slice assignment whose source or destination is a peer pointer
or a tensor built on one; in C++, a peer pointer as pkbsim/inspection/c_peers.py follows it)
and ``rendezvous`` (symmetric-memory rendezvous and allocation, IPC handle get and open).

Peer pointers are followed through the file (a taint): symmetric memory's ``buffer_ptrs`` and
``get_buffer(peer, ...)``, ``cudaIpcOpenMemHandle``/``ipcOpenMemHandle``/
``cuMemImportFromShareableHandle`` results and names saying peer or remote; then anything
assigned from them, returned from a function given them, or passed to a function's parameter.
An index by this rank's own number (``ptrs[rank]``) is this GPU's own memory, not a peer's.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from pkbsim.inspection.c_index import NAME_CALL
from pkbsim.inspection.c_peers import CPeers
from pkbsim.inspection.device_source import DeviceSource
from pkbsim.inspection.patterns import (
    C_COPY_ENGINE,
    DIST_DATA,
    DIST_METADATA,
    DIST_PREFIXES,
    OWN_RANK,
    PEER_ROOT_CALLS,
    PEER_TABLES,
    PY_COPY_ENGINE,
    PY_MEMCPY,
    PY_RENDEZVOUS_SITES,
    STRICT_PEER_NAME,
    WORLD_NAME,
)
from pkbsim.inspection.python_model import (
    PATHS,
    Function,
    Path,
    PythonModel,
    Region,
    last_name,
    listed_dist,
    unparse,
)
from pkbsim.inspection.sizes import Bound, Sizes

CALL_KINDS = ("nccl_payload", "nccl_metadata", "copy_engine", "rendezvous")
TAINT_ROUNDS = 10  # rounds until nothing changes; chains through caches need several


@dataclass(frozen=True)
class CallSite:
    """One call that moves or sets up data between GPUs, and where it sits for the profile."""

    line: int
    call: str  # e.g. "all_reduce", "cudaMemcpyAsync", "copy_"
    kind: str  # one of CALL_KINDS
    path: str  # hot | setup | unknown | fallback
    condition: str  # why it is not hot ("" when hot)
    source: str = "static"  # "static", or "profiler" when a run log added or moved it
    snippet: str = ""  # the source line
    elements: int | None = None  # nccl_metadata by its size: the sent tensor's elements
    dtype: str | None = None  # and their dtype, where known

    @property
    def size(self) -> str:
        """``8 x int64``, ``1 element``; "" when the size is not known."""
        if self.elements is None:
            return ""
        return f"{self.elements} x {self.dtype}" if self.dtype else (
            f"{self.elements} element" + ("s" if self.elements != 1 else ""))

    @property
    def key(self) -> tuple[int, str]:
        return (self.line, self.kind)


def call_sites(py: PythonModel, sources: list[DeviceSource]) -> list[CallSite]:
    """Every call site of CALL_KINDS in the file, sorted by line; one per (line, kind), at the
    best path it is reached on."""
    peers = PeerTaint(py)
    sizes = Sizes(py)
    found: dict[tuple[int, str], CallSite] = {}

    def add(line: int, call: str, kind: str, path: Path, bound: Bound | None = None) -> None:
        site = CallSite(line, call, kind, path.label, path.why,
                        elements=bound.elements if bound else None,
                        dtype=bound.dtype if bound else None)
        old = found.get(site.key)
        if old is None or path.better(Path(old.path, old.condition)):
            found[site.key] = site

    for node, region in py.nodes():
        if isinstance(node, ast.Call):
            kind, call, bound = _classify(py, peers, sizes, node, region)
            if kind:
                add(node.lineno, call, kind, region.path, bound)
        elif isinstance(node, ast.Assign) and _slice_copy(peers, node, region.function):
            add(node.lineno, "slice assignment", "copy_engine", region.path)
    c_paths: _CPaths | None = None
    c_peers: CPeers | None = None
    for src in sources:
        for m in C_COPY_ENGINE.finditer(src.code):
            if m.group(1):  # cudaMemcpy[2D][Async], cuMemcpyDtoD[Async]: on a peer pointer?
                c_peers = c_peers or CPeers(py, sources, peers.kind)
                if not c_peers.copy(src, m):
                    continue
            call = re.sub(r"\s*\($", "", m.group(0))
            c_paths = c_paths or _CPaths(py, sources)
            add(src.line(m.start()), call, "copy_engine", c_paths.path(src.enclosing(m.start())))
    return sorted(found.values(), key=lambda s: (s.line, s.kind))


def _classify(py: PythonModel, peers: PeerTaint, sizes: Sizes, call: ast.Call,
              region: Region) -> tuple[str, str, Bound | None]:
    name = py.dotted(call.func) or ""
    short = name.rsplit(".", 1)[-1] if name else last_name(call.func)
    if name.startswith(DIST_PREFIXES) and listed_dist(name, short):
        if short in DIST_METADATA:
            return "nccl_metadata", short, None
        if short not in DIST_DATA:
            return "", "", None
        bound = sizes.sent(call, name, short, region.function)  # the size rule (issue 32)
        return ("nccl_metadata" if bound else "nccl_payload"), short, bound
    if short in PY_RENDEZVOUS_SITES or name == "torch.distributed._symmetric_memory.empty":
        return "rendezvous", short, None
    if short in PY_COPY_ENGINE:
        return "copy_engine", short, None
    fn = region.function
    if PY_MEMCPY.fullmatch(short) and any(peers.reads(a, fn) for a in
                                          [*call.args, *(k.value for k in call.keywords)]):
        return "copy_engine", short, None
    if short == "copy_" and isinstance(call.func, ast.Attribute):
        operands = [call.func.value, *call.args[:1]]
        if name == "torch.Tensor.copy_":
            operands = list(call.args[:2])
        if any(peers.reads(o, fn) for o in operands):
            return "copy_engine", short, None
    return "", "", None


def _slice_copy(peers: PeerTaint, node: ast.Assign, fn: Function | None) -> bool:
    """``dst[...] = peer_tensor`` or ``peer_tensor[...] = src``: a plain copy (no arithmetic)
    into or out of a tensor (a store into a Python list or dict is not a copy)."""
    if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Subscript):
        return False
    if not isinstance(node.value, ast.Name | ast.Subscript | ast.Attribute | ast.Call):
        return False
    if isinstance(node.value, ast.Call) and last_name(node.value.func) not in (
            "view", "reshape", "view_as", "flatten", "contiguous", "get_buffer") and not \
            peers.py.callees(node.value, fn):
        return False
    target = node.targets[0]
    base = target.value
    while isinstance(base, ast.Subscript | ast.Attribute) and not (
            isinstance(base, ast.Attribute) and last_name(base.value) in ("self", "cls")):
        base = base.value
    if isinstance(base, ast.Name) and peers.container(base.id, fn):
        return False
    if isinstance(base, ast.Attribute) and peers.attrs.get(base.attr) == TABLE:
        return False
    return peers.reads(target.value, fn) or peers.reads(node.value, fn)


def _has_get_buffer(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and last_name(n.func) == "get_buffer"
               for n in ast.walk(node))


class _CPaths:
    """The path of each C++ function: that of the Python calls of its binding (or of the bound
    C++ functions that call it); setup-named functions (init_..., open_handles) run once.
    Callers, bindings and the best path of each Python method name are found once per file."""

    def __init__(self, py: PythonModel, sources: list[DeviceSource]) -> None:
        self.callers: dict[str, set[str]] = {}  # C++ function -> the C++ functions calling it
        for s in sources:
            for m in NAME_CALL.finditer(s.code):
                self.callers.setdefault(m.group(1), set()).add(s.enclosing(m.start()))
        self.bindings: dict[str, set[str]] = {}  # C++ function -> its Python names (.def)
        for s in sources:
            for m in re.finditer(r'\.def\(\s*"(\w+)"\s*,\s*&?\s*(\w+)', s.text):
                self.bindings.setdefault(m.group(2), set()).add(m.group(1))
        self.calls: dict[str, tuple[int, int, Path]] = {}  # method -> (rank, first, best path)
        for order, (node, region) in enumerate(py.nodes()):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                best = self.calls.get(node.func.attr)
                if best is None or region.path.better(best[2]):
                    self.calls[node.func.attr] = (_rank(region.path), order, region.path)

    def path(self, cname: str) -> Path:
        if not cname:
            return Path("unknown", "C++ outside a function")
        names = {cname} | {c for c in self.callers.get(cname, ()) if c}  # one level up
        bound = names.union(*(self.bindings.get(n, set()) for n in names))
        found = [self.calls[name] for name in bound if name in self.calls]
        if found:
            return min(found, key=lambda f: (f[0], f[1]))[2]
        return Path("unknown", f"C++ function {cname}() is not called from Python in this file")


def _rank(path: Path) -> int:
    """``a.better(b)`` when a's rank is lower."""
    return PATHS.index(path.label)


NONE, TABLE, PEER = 0, 1, 2  # what a value holds: nothing of a peer's, pointers, a peer


class PeerTaint:
    """What each name, attribute and function return holds: ``PEER`` (a peer's pointer or a
    tensor on it), ``TABLE`` (a collection of every rank's pointers or tensors, such as
    ``hdl.buffer_ptrs`` or ``torch.tensor(hdl.buffer_ptrs)``; an element picked by another
    rank's index is ``PEER``) or ``NONE``. Tuples and keyed caches are followed element by
    element (``buf, hdl, ptrs = _cache[key]``; ``_cache["buf"]``)."""

    def __init__(self, py: PythonModel) -> None:
        self.py = py
        self.names: dict[tuple[int, str], int] = {}  # (scope id, 0: module; name) -> kind
        self.parts: dict[tuple[int, str], dict[object, int]] = {}  # tuple/dict elements
        self.own: dict[int, set[str]] = {}  # names each function binds (shadowing)
        self.attrs: dict[str, int] = {}  # "self.x" as "x"; "Cls.x" as "Cls.x"
        self.returns: dict[Function, int] = {}
        self.return_parts: dict[Function, dict[object, int]] = {}
        self.passes: set[Function] = set()
        self.assigned = _holders(py.all_nodes)
        self._containers: dict[tuple[str, int], bool] = {}
        self.ignoring: tuple[Function, set[str]] | None = None
        for _ in range(TAINT_ROUNDS):
            if not self._round():
                break

    def reads(self, node: ast.AST, fn: Function | None) -> bool:
        """Does this expression hold a peer's pointer or a tensor on one?"""
        return self.kind(node, fn) == PEER

    def kind(self, node: ast.AST, fn: Function | None) -> int:
        if isinstance(node, ast.Subscript):
            elements = self.elements(node.value, fn)
            key = _const_key(node.slice)
            if elements is not None and key is not None:
                return elements.get(key, NONE)
            base = self.kind(node.value, fn)
            if base == NONE:
                return NONE
            if base == TABLE and OWN_RANK.search(unparse(node.slice)) and not _has_get_buffer(
                    node.value):
                return NONE  # ptrs[rank]: this GPU's own entry (a peer tensor's row: a peer)
            return PEER
        if isinstance(node, ast.Name):
            if _peer_name(node.id) and node.id not in self.assigned:
                return PEER  # a parameter or free name saying peer; bound names say by value
            if self.ignoring is not None and self.ignoring[0] is fn and \
                    node.id in self.ignoring[1]:
                return NONE  # a parameter, while reading what a function returns by itself
            scope = self._scope(node.id, fn)
            found = self.names.get((scope, node.id), NONE)
            parts = self.parts.get((scope, node.id))
            return max(found, max(parts.values(), default=NONE) if parts else NONE)
        if isinstance(node, ast.Attribute):
            if node.attr in PEER_TABLES:
                return TABLE
            if node.attr in ("shape", "dtype", "device", "rank", "world_size"):
                return NONE
            owner = last_name(node.value)
            key = node.attr if owner in ("self", "cls") else f"{owner}.{node.attr}"
            if key in self.attrs:
                return self.attrs[key]
            if node.attr in self.attrs:  # t.ptrs of an object whose class sets self.ptrs
                return self.attrs[node.attr]
            if _peer_name(node.attr) and node.attr not in self.assigned:
                return PEER
            return self.kind(node.value, fn)
        if isinstance(node, ast.Call):
            return self._call_kind(node, fn)
        if isinstance(node, ast.Lambda | ast.Constant):
            return NONE
        if isinstance(node, ast.ListComp | ast.GeneratorExp | ast.SetComp | ast.List
                      | ast.Tuple | ast.Set):
            inner = [self.kind(g.iter, fn) for g in node.generators] + [self.kind(
                node.elt, fn)] if isinstance(node, ast.ListComp | ast.GeneratorExp
                                             | ast.SetComp) else [
                self.kind(e, fn) for e in node.elts]
            return TABLE if max(inner, default=NONE) > NONE else NONE
        return max((self.kind(c, fn) for c in ast.iter_child_nodes(node)
                    if isinstance(c, ast.expr)), default=NONE)

    def _call_kind(self, node: ast.Call, fn: Function | None) -> int:
        short = last_name(node.func)
        if short in PEER_ROOT_CALLS:
            return PEER
        if short == "get_buffer":
            return PEER if node.args and not OWN_RANK.search(unparse(node.args[0])) else NONE
        receiver = node.func.value if isinstance(node.func, ast.Attribute) else None
        if short in ("numel", "size", "element_size", "dim", "stride", "nbytes", "item"):
            return NONE
        if short == "data_ptr" and receiver is not None:
            return PEER if self.kind(receiver, fn) == PEER else NONE
        if short == "get" and receiver is not None and self.elements(receiver, fn):
            return max(self.elements(receiver, fn).values(), default=NONE)  # type: ignore[union-attr]
        callees = self.py.callees(node)
        args = [*node.args, *(k.value for k in node.keywords)]
        if callees:  # a function of this file: what it returns, and its arguments if it
            found = [max(self.returns.get(f, NONE), max(self.return_parts.get(  # passes them
                f, {}).values(), default=NONE)) for f in callees]
            if any(f in self.passes for f in callees):
                found += [self.kind(a.value if isinstance(a, ast.Starred) else a, fn)
                          for a in args]
            return max(found)
        if receiver is not None:
            args.append(receiver)
        kinds = [self.kind(a.value if isinstance(a, ast.Starred) else a, fn) for a in args]
        return max(kinds, default=NONE)

    def elements(self, node: ast.AST, fn: Function | None) -> dict[object, int] | None:
        """Per element (index or key), what this tuple- or dict-valued expression holds."""
        if isinstance(node, ast.Tuple):
            if any(isinstance(e, ast.Starred) for e in node.elts):
                return None
            return {i: self.kind(e, fn) for i, e in enumerate(node.elts)}
        if isinstance(node, ast.Dict) and all(_const_key(k) is not None for k in node.keys
                                              if k is not None) and None not in node.keys:
            return {_const_key(k): self.kind(v, fn) for k, v in zip(node.keys, node.values,
                                                                    strict=True)}
        if isinstance(node, ast.Name):
            return self.parts.get((self._scope(node.id, fn), node.id))
        if isinstance(node, ast.Call):
            callees = self.py.callees(node)
            if callees and all(f in self.return_parts for f in callees):
                return self.return_parts[callees[0]]
            if last_name(node.func) == "get" and isinstance(node.func, ast.Attribute):
                return self.elements(node.func.value, fn)  # _cache.get(key)
        if isinstance(node, ast.Subscript) and _const_key(node.slice) is None:
            return self.elements(node.value, fn)  # _cache[key]: the tuple stored there
        return None

    def _scope(self, name: str, fn: Function | None) -> int:
        """The scope a name resolves to: the function's own, else the module's."""
        if fn is None or name in self.py.ev._globals(fn):
            return 0
        return id(fn) if name in self.own.get(id(fn), set()) or (
            id(fn), name) in self.names or (id(fn), name) in self.parts else 0

    def _round(self) -> bool:
        changed = False
        for node in self.py.all_nodes:
            fn = self.py.scope_of(node)
            targets: list[ast.AST] = []
            value: ast.AST | None = None
            if isinstance(node, ast.Assign):
                targets, value = list(node.targets), node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                targets, value = [node.target], node.value
            elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
                if self.kind(node.iter, fn) > NONE:
                    changed |= self._bind(node.target, None, PEER, fn)
                continue
            elif isinstance(node, ast.Return) and node.value is not None and fn is not None:
                changed |= self._return(node.value, fn)
                continue
            elif isinstance(node, ast.Call):
                changed |= self._arguments(node, fn) | self._update(node, fn)
                continue
            if value is None:
                continue
            if fn is not None:
                self.own.setdefault(id(fn), set()).update(
                    n for t in targets for n in _bound(t) if n not in self.py.ev._globals(fn))
            elements = self.elements(value, fn)
            whole = self.kind(value, fn)
            for t in targets:
                changed |= self._bind(t, elements, whole, fn)
        return changed

    def _bind(self, target: ast.AST, elements: dict[object, int] | None, whole: int,
              fn: Function | None) -> bool:
        if isinstance(target, ast.Tuple | ast.List):
            if elements is not None and set(elements) == set(range(len(target.elts))):
                return any([self._bind(t, None, elements[i], fn)
                            for i, t in enumerate(target.elts)])
            return any([self._bind(t, None, whole, fn) for t in target.elts])
        if isinstance(target, ast.Starred):
            return self._bind(target.value, None, whole, fn)
        if isinstance(target, ast.Name):
            key = (self._scope(target.id, fn), target.id)
            if elements is not None:
                merged = {**self.parts.get(key, {}), **{k: max(v, self.parts.get(key, {}).get(
                    k, NONE)) for k, v in elements.items()}}
                if merged != self.parts.get(key) and max(merged.values(), default=NONE):
                    self.parts[key] = merged
                    return True
                return False
            if whole > self.names.get(key, NONE):
                self.names[key] = whole
                return True
            return False
        if isinstance(target, ast.Attribute):
            owner = last_name(target.value)
            key_a = target.attr if owner in ("self", "cls") else f"{owner}.{target.attr}"
            if whole > self.attrs.get(key_a, NONE):
                self.attrs[key_a] = whole
                return True
            return False
        if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Attribute):
            if whole == NONE or not self._container_attr(target.value.attr):
                return False  # X.remote[r] = peer pointer: a table held by an object
            return self._bind(target.value, None, TABLE, fn)
        if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
            const = _const_key(target.slice)
            if const is not None:  # _cache["ptrs"] = ...
                return self._bind(target.value, {const: whole}, whole, fn) if whole else False
            if not self.container(target.value.id, fn):
                return False  # out[i] = peer[i]: a copy into a tensor, which stays local
            if elements is not None:  # _cache[key] = (buf, hdl, ptrs)
                return self._bind(target.value, elements, whole, fn)
            if whole == NONE:
                return False
            return self._bind(target.value, None, TABLE, fn)  # peers[i] = a peer tensor
        return False

    def container(self, name: str, fn: Function | None) -> bool:
        """Is ``name`` a Python list or dict here (``[]``, ``{}``, ``[None] * n``, dict())?"""
        key = (name, self._scope(name, fn))
        if key not in self._containers:
            self._containers[key] = self._is_container(name, fn)
        return self._containers[key]

    def _is_container(self, name: str, fn: Function | None) -> bool:
        nodes = self.py.all_nodes if self._scope(name, fn) == 0 or fn is None else ast.walk(fn)
        for node in nodes:
            if isinstance(node, ast.Assign) and _container_value(node.value) and name in [
                    n for t in node.targets for n in _bound(t)]:
                return True
        return False

    def _container_attr(self, attr: str) -> bool:
        return any(isinstance(n, ast.Assign) and any(
            isinstance(t, ast.Attribute) and t.attr == attr for t in n.targets)
            and _container_value(n.value) for n in self.py.all_nodes)

    def _update(self, call: ast.Call, fn: Function | None) -> bool:
        """``_cache.update(buf=b, ptrs=p)``: keyed elements; ``ptrs.append(peer)``: a table;
        ``cudaIpcOpenMemHandle(ctypes.byref(p), ...)``: p is a peer pointer;
        ``all_gather_object(ptrs, buf.data_ptr())``: ptrs is every rank's pointers, a table."""
        if last_name(call.func) in PEER_ROOT_CALLS:
            outs = [a.args[0] for a in call.args if isinstance(a, ast.Call) and last_name(
                a.func) in ("byref", "pointer", "addressof") and a.args]
            return any([self._bind(o, None, PEER, fn) for o in outs])
        if last_name(call.func) == "all_gather_object" and len(call.args) == 2 and any(
                isinstance(n, ast.Call) and last_name(n.func) == "data_ptr"
                for n in ast.walk(call.args[1])):
            return self._bind(call.args[0], None, TABLE, fn)
        if isinstance(call.func, ast.Attribute) and call.func.attr in (
                "append", "extend", "insert", "add") and call.args:
            kind = max(self.kind(a, fn) for a in call.args)
            return self._bind(call.func.value, None, TABLE, fn) if kind else False
        if not (isinstance(call.func, ast.Attribute) and call.func.attr == "update"
                and isinstance(call.func.value, ast.Name) and call.keywords):
            return False
        elements: dict[object, int] = {k.arg: self.kind(k.value, fn) for k in call.keywords
                                       if k.arg}
        return self._bind(call.func.value, elements, NONE, fn) if any(
            elements.values()) else False

    def _return(self, value: ast.expr, fn: Function) -> bool:
        """What ``fn`` returns whatever it is given; one that returns (from) its parameters
        passes its arguments' kind through at each call."""
        params = {a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]}
        if any(isinstance(n, ast.Name) and n.id in params for n in ast.walk(value)):
            self.passes.add(fn)
        self.ignoring = (fn, params)
        try:
            return self._returned(value, fn)
        finally:
            self.ignoring = None

    def _returned(self, value: ast.expr, fn: Function) -> bool:
        elements = self.elements(value, fn)
        if elements is not None:
            old = self.return_parts.get(fn, {})
            merged = {**old, **{k: max(v, old.get(k, NONE)) for k, v in elements.items()}}
            if merged != old and max(merged.values(), default=NONE):
                self.return_parts[fn] = merged
                return True
            return False
        kind = self.kind(value, fn)
        if kind > self.returns.get(fn, NONE):
            self.returns[fn] = kind
            return True
        return False

    def _arguments(self, call: ast.Call, fn: Function | None) -> bool:
        """A peer value passed to a function of this file taints its parameter."""
        changed = False
        for callee in self.py.callees(call):
            params = [a.arg for a in [*callee.args.posonlyargs, *callee.args.args]]
            constructor = isinstance(call.func, ast.Name) and call.func.id in self.py.classes
            if params and ((self.py.is_method(callee) and not constructor)
                           or params[0] == "self"):
                params = params[1:]
            pairs = list(zip(params, call.args, strict=False)) + [
                (k.arg, k.value) for k in call.keywords if k.arg]
            for param, arg in pairs:
                kind = NONE if isinstance(arg, ast.Starred) else self.kind(arg, fn)
                if kind > self.names.get((id(callee), param), NONE):
                    self.names[(id(callee), param)] = kind
                    self.own.setdefault(id(callee), set()).add(param)
                    changed = True
        return changed


def _container_value(value: ast.AST) -> bool:
    """A Python list or dict: ``[]``, ``{}``, ``[None] * n``, ``dict()``, a comprehension."""
    if isinstance(value, ast.BinOp):
        value = value.left
    return isinstance(value, ast.List | ast.Dict | ast.ListComp | ast.DictComp) or (
        isinstance(value, ast.Call) and last_name(value.func) in (
            "dict", "list", "OrderedDict", "defaultdict"))


def _holders(nodes: list[ast.AST]) -> set[str]:
    """Names and attributes whose name says nothing of their value: cache holders (assigned
    None, a tuple or an empty container somewhere, like ``_peers = None``), functions, classes
    and imports. Other names saying peer or remote (``self.remote = dict(ptrs)``, a
    ``peer_ptr`` parameter) are taken at their word."""
    out: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None and (
                (_container_value(node.value) and not _filled(node.value))
                or isinstance(node.value, ast.Tuple)
                or (isinstance(node.value, ast.Constant) and node.value.value is None)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out |= {last_name(t) for t in targets if last_name(t)}
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.add(node.name)
        elif isinstance(node, ast.alias):
            out.add((node.asname or node.name).split(".")[0])
    return out


def _filled(value: ast.AST) -> bool:
    return (isinstance(value, ast.List | ast.Set) and bool(value.elts)) or (
        isinstance(value, ast.Dict) and bool(value.keys)) or (
        isinstance(value, ast.Call) and bool(value.args or value.keywords))


def _bound(target: ast.AST) -> list[str]:
    """Names an assignment target binds (not ``c`` of ``c[k] = v`` or ``c.x = v``)."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Tuple | ast.List):
        return [n for t in target.elts for n in _bound(t)]
    if isinstance(target, ast.Starred):
        return _bound(target.value)
    return []


def _const_key(node: ast.AST | None) -> object:
    """A literal index or key (``0``, ``"buf"``), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int | str) and not isinstance(
            node.value, bool):
        return node.value
    return None


def _peer_name(name: str) -> bool:
    """peer_ptrs, remote_buf; not a count (n_peers, num_peers)."""
    return STRICT_PEER_NAME.search(name) is not None and WORLD_NAME.search(name) is None


def _scope_id(fn: Function | None) -> int:
    return id(fn) if fn is not None else 0
