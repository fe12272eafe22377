"""The Python side of an inspection: imports, functions, and the regions of code reached from
``solution()``, each marked as running on every call or once (behind a cache check)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from pkbsim.inspection.patterns import DEVICE_SINKS, DIST_PREFIXES, SYMM_OPS


@dataclass(frozen=True)
class Region:
    """An expression or simple statement in code that runs, and whether it runs every call."""

    root: ast.AST
    per_call: bool
    function: ast.FunctionDef | ast.AsyncFunctionDef | None


Function = ast.FunctionDef | ast.AsyncFunctionDef


class PythonModel:
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

    def nodes(self) -> Iterator[tuple[ast.AST, Region]]:
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

    def _reach(self) -> list[Region]:
        """Regions of module code (once), and of functions reached from solution() with
        whether each runs on every call."""
        regions: list[Region] = []
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
            found: list[Region] = []
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
            owner = self.classes.get(last_name(call.func.value))
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
        name, short = self.dotted(node.func) or "", last_name(node.func)
        receiver = node.func.value if isinstance(node.func, ast.Attribute) else None
        return ((name.startswith(DIST_PREFIXES) and listed_dist(name, short))
                or name.startswith((SYMM_OPS, "torch.distributed._symmetric_memory"))
                or short == "get_buffer" or isinstance(node.func, ast.Subscript)
                or (isinstance(receiver, ast.Name) and receiver.id in self.extensions)
                or (isinstance(receiver, ast.Call)
                    and any(f in self.builders for f in self.callees(receiver))))

    def _extensions(self) -> tuple[set[Function], set[str]]:
        """Functions that compile an extension, and names bound to one."""
        builders = {f for f in self.all_functions() if any(
            isinstance(n, ast.Call) and last_name(n.func) in DEVICE_SINKS for n in ast.walk(f))}
        names = {t for n in ast.walk(self.tree) if isinstance(n, ast.Assign)
                 and isinstance(n.value, ast.Call)
                 and (last_name(n.value.func) in DEVICE_SINKS
                      or any(f in builders for f in self.callees(n.value)))
                 for t in assigned_names(n)}
        return builders, names

    def _block(self, stmts: list[ast.stmt], per_call: bool, fn: Function | None,
               out: list[Region]) -> None:
        for stmt in stmts:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                continue
            if isinstance(stmt, ast.If) and per_call and self._guard(stmt.test, fn):
                miss_in_body = _miss_in_body(stmt.test)
                out.append(Region(stmt.test, per_call, fn))
                self._block(stmt.body, not miss_in_body, fn, out)
                self._block(stmt.orelse, miss_in_body, fn, out)
                hit = stmt.orelse if miss_in_body else stmt.body
                if any(isinstance(n, ast.Return) for s in hit for n in ast.walk(s)):
                    per_call = False  # the rest runs only on a cache miss
                continue
            if isinstance(stmt, ast.For | ast.AsyncFor) and stmt not in self.loops:
                self.loops.append(stmt)
            headers, bodies = _split(stmt)
            out.extend(Region(h, per_call, fn) for h in headers)
            for body in bodies:
                self._block(body, per_call, fn, out)

    def _guard(self, test: ast.expr, fn: Function | None) -> bool:
        """Does this test read cached state (module-level mutable names, globals, self.x)?"""
        state = set(self.state)
        if fn is not None:
            state |= {n for g in ast.walk(fn) if isinstance(g, ast.Global) for n in g.names}
            for _ in range(2):  # locals derived from state: c = _cache.get(key)
                for node in ast.walk(fn):
                    if isinstance(node, ast.Assign) and reads_names(node.value, state):
                        state |= assigned_names(node)
        return reads_names(test, state)


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
                   or (isinstance(value, ast.Call) and last_name(value.func) in (
                       "dict", "list", "set", "OrderedDict", "defaultdict")))
        if mutable:
            state |= {t.id for t in targets if isinstance(t, ast.Name)}
    return state


def reads_names(node: ast.AST, names: set[str]) -> bool:
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


def last_name(node: ast.AST) -> str:
    """``c`` of ``a.b.c`` or of a name ``c``; "" for anything else."""
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def unparse(node: ast.AST) -> str:
    """The node as Python source."""
    return ast.unparse(node)


def assigned_names(node: ast.Assign) -> set[str]:
    """The plain names an assignment binds (``a = ...``, ``a, b = ...``)."""
    names: set[str] = set()
    for target in node.targets:
        elts = target.elts if isinstance(target, ast.Tuple | ast.List) else [target]
        names |= {e.id for e in elts if isinstance(e, ast.Name)}
    return names


def listed_dist(name: str, short: str) -> bool:
    """A torch.distributed call worth listing: not a query (get_*, is_*), not a class."""
    return (not name.startswith("torch.distributed._symmetric_memory") and bool(short)
            and not short[0].isupper() and not short.startswith(("get_", "is_")))
