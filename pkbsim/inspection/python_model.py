"""The Python side of an inspection: imports, functions, and the regions of code reached from
``solution()``, each marked as running on every call or once (behind a cache check)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from pkbsim.inspection.patterns import DEVICE_SINKS, DIST_PREFIXES, SYMM_OPS
from pkbsim.inspection.profile import (
    FALSE,
    PKB_PROFILE,
    TRUE,
    UNKNOWN,
    VARIES,
    Evaluator,
    LambdaRef,
    Profile,
)

PATHS = ("hot", "setup", "unknown", "fallback")  # the best first
_RANK = {label: i for i, label in enumerate(PATHS)}


@dataclass(frozen=True)
class Path:
    """Where code sits for the profile: ``hot`` (every call), ``setup`` (once), ``unknown``
    (a test the profile cannot decide) or ``fallback`` (not taken), with the reason."""

    label: str = "hot"
    why: str = ""

    def enter(self, label: str, why: str) -> Path:
        """This path, further behind a condition of kind ``label``: the worse one wins."""
        return self if _RANK[self.label] >= _RANK[label] else Path(label, why)

    def better(self, other: Path) -> bool:
        return _RANK[self.label] < _RANK[other.label]


HOT = Path()


@dataclass(frozen=True)
class Region:
    """An expression or simple statement, where it sits for the profile, and its function."""

    root: ast.AST
    path: Path
    function: ast.FunctionDef | ast.AsyncFunctionDef | None

    @property
    def per_call(self) -> bool:
        return self.path.label == "hot"

    @property
    def reached(self) -> bool:
        """On the profile's path: every call or once (not a fallback)."""
        return self.path.label != "fallback"


Function = ast.FunctionDef | ast.AsyncFunctionDef
CACHE_DECORATORS = ("cache", "lru_cache", "cached_property")
MUTATORS = {"append", "extend", "update", "setdefault", "add", "insert", "pop", "clear",
            "__setitem__"}
MAX_CONDITION_CHARS = 90


class PythonModel:
    """Imports, functions, Triton kernels and the regions of code, each placed on the profile's
    path (hot, setup, unknown or fallback) as reached from ``solution()``."""

    def __init__(self, tree: ast.Module, profile: Profile = PKB_PROFILE) -> None:
        self.tree = tree
        self.profile = profile
        self.all_nodes = list(ast.walk(tree))  # walked once; most passes read every node
        self.aliases = _module_aliases(tree, _aliases(self.all_nodes))
        self.parents = {child: node for node in self.all_nodes
                        for child in ast.iter_child_nodes(node)}
        self.functions: dict[str, list[Function]] = {}
        self.methods: dict[str, list[Function]] = {}
        self.classes: dict[str, ast.ClassDef] = {}
        for node in self.all_nodes:
            if isinstance(node, ast.ClassDef):
                self.classes[node.name] = node
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                in_class = isinstance(self.parents.get(node), ast.ClassDef)
                (self.methods if in_class else self.functions).setdefault(node.name, []).append(
                    node)
        self.jit = [f for fs in self.functions.values() for f in fs if self._decorated(f, "jit")]
        self.state = _module_state(tree, self.all_nodes)
        self.instances = self._instances()
        self.builders, self.extensions = self._extensions()
        self.solutions = self.functions.get("solution", [])
        self._calls_of: dict[Function, list[tuple[ast.Call, Function | None]]] | None = None
        self.ev = Evaluator(self, profile)
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
        """Every node of the file's code with its region; loops come as their statements. A
        conditional expression's branches (``a if cond else b``) are placed as an if's are."""
        for region in self.regions:
            yield from self._walk(region.root, region)

    def _walk(self, node: ast.AST, region: Region) -> Iterator[tuple[ast.AST, Region]]:
        yield node, region
        if isinstance(node, ast.Lambda):
            return  # its body runs where it is called: a region of its own
        if isinstance(node, ast.IfExp):
            yield from self._walk(node.test, region)
            body, orelse = self._branches(node.test, region.path, region.function)
            yield from self._walk(node.body, Region(node.body, body, region.function))
            yield from self._walk(node.orelse, Region(node.orelse, orelse, region.function))
            return
        for child in ast.iter_child_nodes(node):
            yield from self._walk(child, region)

    def _branches(self, test: ast.expr, path: Path, fn: Function | None) -> tuple[Path, Path]:
        """The paths of an if's body and else under the profile."""
        verdict = self.ev.test(test, fn)
        cond = _condition(test)
        if verdict is TRUE:
            return path, path.enter("fallback", f"else of `if {cond}`, true under the profile")
        if verdict is FALSE:
            return path.enter("fallback", f"`if {cond}` is false under the profile"), path
        if verdict is VARIES:
            return path, path
        return (path.enter("unknown", f"`if {cond}` is undecided under the profile"),
                path.enter("unknown", f"else of `if {cond}`, undecided under the profile"))

    def _decorated(self, fn: Function, last: str) -> bool:
        for dec in fn.decorator_list:
            target = dec.func if isinstance(dec, ast.Call) else dec
            name = self.dotted(target) or ""
            if name.split(".")[-1] == last and (last != "jit" or "triton" in name):
                return True
        return False

    def _reach(self) -> list[Region]:
        """Module code (setup), functions reached from solution() and module code, each at the
        best path it is reached on, and functions reached from neither (fallback)."""
        module: list[Region] = []
        self._block(self.tree.body, Path("setup", "module level: runs once, at import"), None,
                    module)
        best: dict[Function, Path] = {}
        found: dict[Function, list[Region]] = {}  # and lambdas
        roots = self.solutions or [f for fs in self.functions.values() for f in fs
                                   if f not in self.jit]
        todo: list[tuple[Function | ast.Lambda, Path]] = [(f, HOT) for f in roots]
        todo += self._called(module)
        lambdas: dict[ast.Lambda, Path] = {}
        while todo:
            unit, path = todo.pop()
            if isinstance(unit, ast.Lambda):
                if unit in lambdas and not path.better(lambdas[unit]):
                    continue
                lambdas[unit] = path
                body = [Region(unit.body, path, self.scope_of(unit))]
                found[unit] = body  # type: ignore[index]
                todo += self._called(body)
                continue
            fn = unit
            path = self._decorated_path(fn, path)
            if fn in best and not path.better(best[fn]):
                continue
            best[fn] = path
            regions: list[Region] = []
            self._block(fn.body, path, fn, regions)
            found[fn] = regions
            todo += self._called(regions)
        for fn in self.all_functions():
            if fn not in best and fn not in self.jit:
                regions = []
                self._block(fn.body, Path("fallback", f"{fn.name}() is never called from "
                                                      "solution()"), fn, regions)
                found[fn] = regions
        for lam in (n for n in self.all_nodes if isinstance(n, ast.Lambda)):
            if lam not in lambdas:
                found[lam] = [Region(lam.body, Path(  # type: ignore[index]
                    "fallback", "a lambda never called under the profile"), self.scope_of(lam))]
        return module + [r for regions in found.values() for r in regions]

    def _called(self, regions: list[Region]) -> list[tuple[Function | ast.Lambda, Path]]:
        found: list[tuple[Function | ast.Lambda, Path]] = []
        for r in regions:
            for node, region in self._walk(r.root, r):
                if isinstance(node, ast.Call):
                    found += [(c, region.path) for c in self.callees(node, region.function)]
                    found += [(lam, region.path) for lam in self._lambdas(node, region.function)]
        return found

    def _decorated_path(self, fn: Function, path: Path) -> Path:
        """Caching decorators run the body once; a decorator of this file runs it where its
        wrapper calls the function it wraps (``if key not in box: box[key] = f(...)``)."""
        decorator = next((c for c in CACHE_DECORATORS if self._decorated(fn, c)), None)
        if decorator is not None:
            return path.enter("setup", f"@{decorator} function {fn.name}: runs once")
        for dec in fn.decorator_list:
            target = dec.func if isinstance(dec, ast.Call) else dec
            local = self.functions.get(last_name(target), []) if isinstance(
                target, ast.Name) else []
            for wrapper_fn in local:
                inner = self._wrapper_path(wrapper_fn)
                if inner is not None:
                    path = path.enter(inner.label, f"@{wrapper_fn.name}: {inner.why}")
        return path

    def _wrapper_path(self, decorator: Function) -> Path | None:
        """Where a decorator's wrapper calls the wrapped function (its first parameter)."""
        params = [a.arg for a in decorator.args.args]
        inner = next((n for n in decorator.body if isinstance(n, ast.FunctionDef
                                                               | ast.AsyncFunctionDef)), None)
        if not params or inner is None:
            return None
        regions: list[Region] = []
        self._block(inner.body, HOT, inner, regions)
        paths = [r.path for region in regions for node, r in self._walk(region.root, region)
                 if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                 and node.func.id == params[0]]
        return min(paths, key=lambda p: _RANK[p.label]) if paths else None

    def _lambdas(self, call: ast.Call, fn: Function | None) -> list[ast.Lambda]:
        """Lambdas a call runs: one it names (``impl = _IMPLS.get(k, lambda t: ...)``;
        ``impl(x)``), and those passed to it as arguments (``map(lambda t: ..., xs)``)."""
        out = [a for a in [*call.args, *(k.value for k in call.keywords)]
               if isinstance(a, ast.Lambda)]
        if not isinstance(call.func, ast.Attribute) and fn is not None and not (
                isinstance(call.func, ast.Name) and (call.func.id in self.functions
                                                     or call.func.id in self.classes)):
            ref = self.ev.value(call.func, fn)
            if isinstance(ref, LambdaRef):
                out.append(ref.node)
        return out

    def callees(self, call: ast.Call, fn: Function | None = None) -> list[Function]:
        """What a call runs: a function, ``Cls(...)`` its ``__init__``, an instance of a class
        of this file (``obj(...)``, ``Cls(...)(...)``) its ``__call__`` or ``forward``,
        ``Cls.method``/``Cls.apply``, ``obj.method`` every method of that name, and a name
        bound to a function (``impl = _IMPLS.get(x.dtype, _nccl)``) that function."""
        func = call.func
        if isinstance(func, ast.Name):
            cls = self.classes.get(func.id)
            if cls is None and func.id == "cls" and fn is not None:  # cls(...) in a classmethod
                cls = self.class_of(fn)
            if cls is not None:
                return _methods(cls, "__init__")
            if func.id in self.instances:
                return self._instance_call(self.instances[func.id])
            direct = [f for f in self.functions.get(func.id, []) if f not in self.jit]
            if direct or fn is None:
                return direct
            ref = self.ev.name(func.id, fn)
            return [f for f in self.functions.get(getattr(ref, "name", ""), [])
                    if f not in self.jit]
        if isinstance(func, ast.Call) and isinstance(func.func, ast.Name) and \
                func.func.id in self.classes:
            return self._instance_call(self.classes[func.func.id])
        if isinstance(func, ast.Subscript | ast.Call | ast.IfExp) and fn is not None:
            ref = self.ev.value(func, fn)  # _IMPLS[x.dtype](x), _IMPLS.get(k, _nccl)(x)
            return [f for f in self.functions.get(getattr(ref, "name", ""), [])
                    if f not in self.jit]
        if isinstance(func, ast.Attribute) and func.attr in self.classes:  # Outer.Inner(...)
            return _methods(self.classes[func.attr], "__init__")
        if isinstance(func, ast.Attribute):
            owner = self.classes.get(last_name(func.value))
            if owner is not None:  # Cls.method(...); Cls.apply(...) runs Cls.forward
                return _methods(owner, "forward" if func.attr == "apply" else func.attr)
            if isinstance(func.value, ast.Attribute) and func.attr not in self.methods and \
                    last_name(func.value) in self.instances:  # self.impl(x)
                return self._instance_call(self.instances[last_name(func.value)])
            return self.methods.get(func.attr, [])
        return []

    def _instance_call(self, cls: ast.ClassDef) -> list[Function]:
        return _methods(cls, "__call__") or _methods(cls, "forward")

    def _instances(self) -> dict[str, ast.ClassDef]:
        """Names and attributes bound to an instance of one of this file's classes."""
        out: dict[str, ast.ClassDef] = {}
        for node in self.all_nodes:
            if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Call) \
                    and isinstance(node.value.func, ast.Name) and node.value.func.id in \
                    self.classes:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    name = last_name(t)
                    if name:
                        out[name] = self.classes[node.value.func.id]
        return out

    def calls_of(self, fn: Function) -> list[tuple[ast.Call, Function | None]]:
        """Every call in the file that may run ``fn``, with the function it sits in."""
        if self._calls_of is None:
            index: dict[Function, list[tuple[ast.Call, Function | None]]] = {}
            for node in self.all_nodes:
                if isinstance(node, ast.Call):
                    for callee in self.callees(node):
                        index.setdefault(callee, []).append((node, self.scope_of(node)))
            self._calls_of = index
        return self._calls_of.get(fn, [])

    def scope_of(self, node: ast.AST) -> Function | None:
        """The function whose body holds ``node`` (None at module level)."""
        node = self.parents.get(node)  # type: ignore[assignment]
        while node is not None and not isinstance(node, ast.FunctionDef
                                                  | ast.AsyncFunctionDef):
            node = self.parents.get(node)  # type: ignore[assignment]
        return node

    def enclosing(self, fn: Function) -> Function | None:
        return self.scope_of(fn)

    def in_except(self, node: ast.AST) -> bool:
        up = self.parents.get(node)
        while up is not None and not isinstance(up, ast.FunctionDef | ast.AsyncFunctionDef):
            if isinstance(up, ast.ExceptHandler):
                return True
            up = self.parents.get(up)
        return False

    def in_loop(self, node: ast.AST) -> bool:
        up = self.parents.get(node)
        while up is not None and not isinstance(up, ast.FunctionDef | ast.AsyncFunctionDef):
            if isinstance(up, ast.For | ast.AsyncFor | ast.While):
                return True
            up = self.parents.get(up)
        return False

    def class_of(self, fn: Function) -> ast.ClassDef | None:
        while fn is not None:
            parent = self.parents.get(fn)
            if isinstance(parent, ast.ClassDef):
                return parent
            fn = self.enclosing(fn)  # type: ignore[assignment]
        return None

    def is_method(self, fn: Function) -> bool:
        return isinstance(self.parents.get(fn), ast.ClassDef) and not any(
            last_name(d) == "staticmethod" for d in fn.decorator_list)

    def self_assignments(self, cls: ast.ClassDef, attr: str) -> list[tuple[Function, ast.expr]]:
        """``self.attr = value`` in the class's methods, with the method."""
        out = []
        for method in (f for f in cls.body if isinstance(f, ast.FunctionDef
                                                         | ast.AsyncFunctionDef)):
            for node in ast.walk(method):
                if isinstance(node, ast.Assign) and any(
                        isinstance(t, ast.Attribute) and t.attr == attr
                        and last_name(t.value) in ("self", "cls") for t in node.targets):
                    out.append((method, node.value))
        return out

    def self_state(self, cls: ast.ClassDef) -> set[str]:
        """Attributes used as caches: set to None or a container, changed in place, or set
        outside ``__init__``."""
        state: set[str] = set()
        for method in (f for f in cls.body if isinstance(f, ast.FunctionDef
                                                         | ast.AsyncFunctionDef)):
            for node in ast.walk(method):
                targets = (node.targets if isinstance(node, ast.Assign) else [node.target]
                           if isinstance(node, ast.AugAssign | ast.AnnAssign) else [])
                for t in targets:
                    base = t.value if isinstance(t, ast.Subscript) else t
                    if not (isinstance(base, ast.Attribute) and last_name(base.value) in (
                            "self", "cls")):
                        continue
                    value = getattr(node, "value", None)
                    if (t is not base or isinstance(node, ast.AugAssign)
                            or method.name != "__init__" or _mutable(value)):
                        state.add(base.attr)
        return state

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
        names = {t for n in self.all_nodes if isinstance(n, ast.Assign)
                 and isinstance(n.value, ast.Call)
                 and (last_name(n.value.func) in DEVICE_SINKS
                      or any(f in builders for f in self.callees(n.value)))
                 for t in assigned_names(n)}
        return builders, names

    def _block(self, stmts: list[ast.stmt], path: Path, fn: Function | None,
               out: list[Region]) -> None:
        for stmt in stmts:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                continue
            if isinstance(stmt, ast.If):
                out.append(Region(stmt.test, path, fn))
                path = self._if(stmt, path, fn, out)
                continue
            if isinstance(stmt, ast.Try | ast.TryStar):
                self._block(stmt.body, path, fn, out)
                for handler in stmt.handlers:
                    kind = unparse(handler.type) if handler.type is not None else ""
                    self._block(handler.body, path.enter(
                        "fallback", f"`except {kind}`".replace(" `", "`") + ": no exception "
                        "under the profile"), fn, out)
                self._block(stmt.orelse, path, fn, out)
                self._block(stmt.finalbody, path, fn, out)
                if _terminates(stmt.body) and not stmt.finalbody:
                    path = path.enter("fallback", "after a `try` that returns")
                continue
            if isinstance(stmt, ast.For | ast.AsyncFor) and stmt not in self.loops:
                self.loops.append(stmt)
            if isinstance(stmt, ast.Match):
                out.append(Region(stmt.subject, path, fn))
                self._match(stmt, path, fn, out)
                continue
            headers, bodies = _split(stmt)
            out.extend(Region(h, path, fn) for h in headers)
            inner = path
            if isinstance(stmt, ast.For | ast.AsyncFor) and self.ev.empty_loop(stmt.iter, fn):
                inner = path.enter("fallback", f"`for ... in {_condition(stmt.iter)}` runs no "
                                               "iteration under the profile")
            if isinstance(stmt, ast.While):
                verdict = self.ev.test(stmt.test, fn)
                if verdict is FALSE:
                    inner = path.enter("fallback", f"`while {_condition(stmt.test)}` is false "
                                                   "under the profile")
                elif verdict is UNKNOWN and not self._guard(stmt.test, fn):
                    inner = path.enter("unknown", f"`while {_condition(stmt.test)}` is "
                                                  "undecided under the profile")
            for body in bodies:
                self._block(body, inner, fn, out)
                inner = path  # a loop's else runs
            if isinstance(stmt, ast.Return | ast.Raise):
                path = path.enter("fallback", "unreachable: after return or raise")

    def _match(self, stmt: ast.Match, path: Path, fn: Function | None, out: list[Region]) -> None:
        """Cases in order: the first the profile matches runs, the others are fallbacks."""
        subject = _condition(stmt.subject)
        taken: str | None = None
        for case in stmt.cases:
            pattern = unparse(case.pattern)
            if taken is not None:
                here = path.enter("fallback", f"`case {taken}` of `match {subject}` is taken "
                                              "under the profile")
            else:
                verdict = self.ev.matches(stmt.subject, case, fn)
                if verdict is TRUE:
                    here, taken = path, pattern
                elif verdict is FALSE:
                    here = path.enter("fallback", f"`case {pattern}` does not match "
                                                  f"`{subject}` under the profile")
                elif verdict is VARIES:
                    here = path
                else:
                    here = path.enter("unknown", f"`case {pattern}` of `match {subject}` is "
                                                 "undecided under the profile")
            self._block(case.body, here, fn, out)

    def _if(self, stmt: ast.If, path: Path, fn: Function | None, out: list[Region]) -> Path:
        """Place an if's branches; the path of the statements after it."""
        verdict = self.ev.test(stmt.test, fn)
        cond = _condition(stmt.test)
        if verdict is UNKNOWN and path.label != "fallback" and self._guard(stmt.test, fn):
            miss_in_body = _miss_in_body(stmt.test)
            miss = path.enter("setup", f"once: behind the cache check `if {cond}`")
            self._block(stmt.body, miss if miss_in_body else path, fn, out)
            self._block(stmt.orelse, path if miss_in_body else miss, fn, out)
            hit = stmt.orelse if miss_in_body else stmt.body
            if any(isinstance(n, ast.Return) for s in hit for n in ast.walk(s)):
                return path.enter("setup", f"once: after the cached return under `if {cond}`")
            return path
        body, orelse = self._branches(stmt.test, path, fn)
        self._block(stmt.body, body, fn, out)
        self._block(stmt.orelse, orelse, fn, out)
        if verdict is TRUE and _terminates(stmt.body):
            return path.enter("fallback", f"after `if {cond}: return`, which the profile takes")
        if verdict is FALSE and _terminates(stmt.orelse):
            return path.enter("fallback", f"after the else of `if {cond}`, which returns")
        return path

    def _guard(self, test: ast.expr, fn: Function | None) -> bool:
        """Does this test read cached state (module-level mutable names, globals, self.x)?"""
        state = set(self.state)
        if fn is not None:
            state |= {n for g in ast.walk(fn) if isinstance(g, ast.Global) for n in g.names}
            for _ in range(2):  # locals derived from state: c = _cache.get(key)
                for node in ast.walk(fn):
                    if isinstance(node, ast.Assign) and reads_names(node.value, state):
                        state |= assigned_names(node)
        probes = any((isinstance(n, ast.Call) and last_name(n.func) in ("hasattr", "getattr"))
                     or (isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                         and (n.value.id in self.classes  # _State.buf: a class attribute
                              or n.value.id in self.instances))  # _STATE.buf: an instance's
                     for n in ast.walk(test))  # hasattr(solution, "_buf"): state on an object
        return probes or reads_names(test, state)


def _module_aliases(tree: ast.Module, aliases: dict[str, str]) -> dict[str, str]:
    """``_c10d = torch.ops._c10d_functional`` at module level: another name for the module."""
    out = dict(aliases)
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(
                stmt.targets[0], ast.Name) and isinstance(stmt.value, ast.Attribute | ast.Name):
            parts: list[str] = []
            node: ast.AST = stmt.value
            while isinstance(node, ast.Attribute):
                parts.append(node.attr)
                node = node.value
            if isinstance(node, ast.Name) and node.id in out:
                out[stmt.targets[0].id] = ".".join([out[node.id], *reversed(parts)])
    return out


def _aliases(nodes: list[ast.AST]) -> dict[str, str]:
    out: dict[str, str] = {}
    for node in nodes:
        if isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def _module_state(tree: ast.Module, nodes: list[ast.AST]) -> set[str]:
    """Module-level names holding caches: assigned None or an empty container, changed in
    place anywhere (``_c[k] = v``, ``_c.append(v)``), or declared global."""
    state = {n for g in nodes if isinstance(g, ast.Global) for n in g.names}
    for stmt in tree.body:
        value = stmt.value if isinstance(stmt, ast.Assign | ast.AnnAssign) else None
        targets = (stmt.targets if isinstance(stmt, ast.Assign) else
                   [stmt.target] if isinstance(stmt, ast.AnnAssign) else [])
        if _mutable(value):
            state |= {t.id for t in targets if isinstance(t, ast.Name)}
    for node in nodes:
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store | ast.Del) and \
                isinstance(node.value, ast.Name):
            state.add(node.value.id)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in MUTATORS and isinstance(node.func.value, ast.Name):
            state.add(node.func.value.id)
    return state


def _mutable(value: ast.AST | None) -> bool:
    """None or an empty container: the start of a cache (a filled literal is a table)."""
    if isinstance(value, ast.Dict):
        return not value.keys
    if isinstance(value, ast.List | ast.Set):
        return not value.elts
    return ((isinstance(value, ast.Constant) and value.value is None)
            or (isinstance(value, ast.Call) and last_name(value.func) in (
                "dict", "list", "set", "OrderedDict", "defaultdict", "WeakKeyDictionary",
                "WeakValueDictionary")))


def _methods(cls: ast.ClassDef, name: str) -> list[Function]:
    return [f for f in cls.body if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
            and f.name == name]


def _condition(test: ast.expr) -> str:
    text = " ".join(unparse(test).split())
    return text if len(text) <= MAX_CONDITION_CHARS else text[:MAX_CONDITION_CHARS - 3] + "..."


def _terminates(stmts: list[ast.stmt]) -> bool:
    """Does this block always end in return or raise?"""
    if not stmts:
        return False
    last = stmts[-1]
    if isinstance(last, ast.Return | ast.Raise):
        return True
    return isinstance(last, ast.If) and _terminates(last.body) and _terminates(last.orelse)


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
