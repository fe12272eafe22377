"""The benchmark's configuration, and a small abstract evaluator that reads a solution's branch
conditions under it.

A :class:`Profile` is what PKB runs: every tensor argument of ``solution()`` in one dtype and
shape, W ranks, CUDA present (compute capability 9.0), the process group initialised, no
environment variable of the solution's own set, no exception. :class:`Evaluator` gives each
expression an abstract value (a Python constant, a dtype, a tensor's dtype and shape, an aligned
device pointer, a value that differs between ranks, or unknown) and each branch test a verdict:
``TRUE``, ``FALSE``, ``VARIES`` (differs between ranks or loop iterations: every branch runs
somewhere) or ``UNKNOWN``. Names are resolved flow-insensitively: a name whose assignments (those
outside ``except`` bodies) all give one value has that value.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

Function = ast.FunctionDef | ast.AsyncFunctionDef


class PythonModel(Protocol):
    """What the evaluator reads of a file's Python model (pkbsim.inspection.python_model)."""

    tree: ast.Module
    all_nodes: list[ast.AST]
    state: set[str]
    functions: dict[str, list[Function]]
    aliases: dict[str, str]
    solutions: list[Function]

    def dotted(self, node: ast.AST) -> str | None: ...
    def enclosing(self, fn: Function) -> Function | None: ...
    def scope_of(self, node: ast.AST) -> Function | None: ...
    def in_except(self, node: ast.AST) -> bool: ...
    def in_loop(self, node: ast.AST) -> bool: ...
    def is_method(self, fn: Function) -> bool: ...
    def calls_of(self, fn: Function) -> list[tuple[ast.Call, Function | None]]: ...
    def class_of(self, fn: Function) -> ast.ClassDef | None: ...
    def self_state(self, cls: ast.ClassDef) -> set[str]: ...
    def self_assignments(self, cls: ast.ClassDef, attr: str
                         ) -> list[tuple[Function, ast.expr]]: ...

ITEMSIZE = {"bfloat16": 2, "float16": 2, "float32": 4, "float64": 8, "int8": 1, "uint8": 1,
            "int16": 2, "int32": 4, "int64": 8, "bool": 1, "float8_e4m3fn": 1,
            "float8_e5m2": 1, "complex64": 8, "complex128": 16}
DTYPE_ALIASES = {"half": "float16", "float": "float32", "double": "float64", "long": "int64",
                 "int": "int32", "short": "int16", "cfloat": "complex64",
                 "cdouble": "complex128"}
ALLOCATION_ALIGN_BYTES = 256  # the CUDA caching allocator's (and cudaMalloc's) alignment
WORLD_NAMES = {"world_size", "world", "ws", "W", "nranks", "n_ranks", "num_ranks", "npes",
               "group_size", "tp_size", "num_gpus", "n_gpus", "world_sz"}
RANK_NAMES = {"rank", "my_rank", "local_rank", "global_rank", "rank_id", "mype", "my_pe",
              "device_id", "dev_id", "tp_rank"}
ENV_WORLD = {"WORLD_SIZE", "LOCAL_WORLD_SIZE"}
ENV_RANK = {"RANK", "LOCAL_RANK", "GROUP_RANK"}
TENSOR_SAME = {"contiguous", "clone", "detach", "view", "reshape", "flatten", "view_as",
               "reshape_as", "narrow", "squeeze", "unsqueeze", "t", "transpose", "permute",
               "cuda", "chunk", "split", "expand", "repeat", "__getitem__", "ravel"}
TENSOR_LIKE = {"empty_like", "zeros_like", "ones_like", "full_like", "rand_like", "randn_like"}
TENSOR_NEW = {"empty", "zeros", "ones", "full", "rand", "randn", "empty_strided"}
MAX_DEPTH = 12
MATH_FUNCTIONS: dict[str, Callable[[float], Any]] = {
    "math.isinf": math.isinf, "math.isnan": math.isnan, "math.isfinite": math.isfinite,
    "math.sqrt": math.sqrt, "math.ceil": math.ceil, "math.floor": math.floor,
    "math.log2": math.log2}
MATH_CONSTANTS = {"math.inf": math.inf, "math.nan": math.nan, "math.pi": math.pi,
                  "math.e": math.e, "torch.inf": math.inf, "numpy.inf": math.inf}
TENSOR_OPS = {"matmul", "mm", "bmm", "addmm", "linear", "cat", "stack", "add", "sub", "mul",
              "div", "relu", "gelu", "silu", "softmax", "log_softmax", "layer_norm",
              "rms_norm", "where", "einsum", "abs", "neg", "exp", "tanh", "sigmoid"}


class _Marker:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


UNKNOWN = _Marker("UNKNOWN")
VARIES = _Marker("VARIES")  # differs between ranks (or loop iterations)
TRUE, FALSE = True, False
Verdict = bool | _Marker  # TRUE, FALSE, VARIES or UNKNOWN


@dataclass(frozen=True)
class Profile:
    """What the benchmark runs: PKB's defaults unless the user says otherwise."""

    dtype: str = "bfloat16"
    world_size: int = 8
    shape: tuple[int, ...] = (1024, 1024)
    capability: tuple[int, int] = (9, 0)

    def __post_init__(self) -> None:
        if self.dtype not in ITEMSIZE:
            raise ValueError(f"unknown dtype {self.dtype!r}: expected one of "
                             f"{', '.join(sorted(ITEMSIZE))}")
        if self.world_size < 1:
            raise ValueError(f"world size {self.world_size}: expected at least 1")

    def describe(self) -> str:
        shape = "x".join(str(s) for s in self.shape)
        return (f"dtype {self.dtype}, world size {self.world_size}, inputs {shape}, CUDA "
                f"(sm_{self.capability[0]}{self.capability[1]}), no exception")


PKB_PROFILE = Profile()


@dataclass(frozen=True)
class DType:
    name: str


@dataclass(frozen=True)
class Tensor:
    dtype: str | None
    shape: tuple[int, ...] | None


@dataclass(frozen=True)
class Pointer:
    """A device pointer from an allocation: aligned to ALLOCATION_ALIGN_BYTES."""


@dataclass(frozen=True)
class Module:
    dotted: str


@dataclass(frozen=True)
class FunctionRef:
    name: str


@dataclass(frozen=True)
class LambdaRef:
    node: ast.Lambda


@dataclass(frozen=True)
class Const:
    value: Any


Value = _Marker | DType | Tensor | Pointer | Module | FunctionRef | LambdaRef | Const

_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Is: operator.eq, ast.IsNot: operator.ne,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}
_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Div: operator.truediv,
    ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.Pow: operator.pow,
    ast.LShift: operator.lshift, ast.RShift: operator.rshift}


def _plain(v: Value) -> object:
    """A value as a Python object to compare or compute with (dtypes compare by name)."""
    if isinstance(v, Const):
        return v.value
    if isinstance(v, DType):
        return v
    return UNKNOWN


def join(values: list[Value]) -> Value:
    """One value for several assignments: equal values stay; tensors keep a shared dtype."""
    if not values:
        return UNKNOWN
    first = values[0]
    if all(v == first for v in values):
        return first
    if all(isinstance(v, Tensor) for v in values):
        dtypes = {v.dtype for v in values if isinstance(v, Tensor)}
        return Tensor(dtypes.pop() if len(dtypes) == 1 else None, None)
    if any(v is VARIES for v in values) and all(v is VARIES or isinstance(v, Const)
                                                for v in values):
        return VARIES
    return UNKNOWN


def truth(v: Value) -> Verdict:
    if v is VARIES or v is UNKNOWN:
        return v
    if isinstance(v, Const):
        try:
            return bool(v.value)
        except Exception:
            return UNKNOWN
    if isinstance(v, Tensor):
        return UNKNOWN
    return TRUE  # a dtype, pointer, module or function


class Evaluator:
    """Abstract values of a solution's expressions under a profile."""

    def __init__(self, py: PythonModel, profile: Profile) -> None:
        self.py = py
        self.profile = profile
        self.input = Tensor(profile.dtype, profile.shape)
        self._names: dict[tuple[int, str], Value] = {}
        self._params: dict[tuple[int, str], Value] = {}
        self._active: set[tuple[int, str]] = set()
        self._assigns = _assignments(py)
        self._mutated = _mutated(py)
        self._declared: dict[int, set[str]] = {}
        self._cut = False  # a value was cut short by MAX_DEPTH: not one to remember

    def _globals(self, fn: Function) -> set[str]:
        key = id(fn)
        if key not in self._declared:
            self._declared[key] = _globals(fn)
        return self._declared[key]

    # --- verdicts ------------------------------------------------------------------------------

    def test(self, expr: ast.expr, fn: Function | None) -> Verdict:
        try:
            return truth(self.value(expr, fn))
        except RecursionError:
            raise
        except Exception:
            return UNKNOWN

    def matches(self, subject: ast.expr, case: ast.match_case, fn: Function | None) -> Verdict:
        """Does ``case`` match ``subject`` (values, ``|`` and ``_`` patterns; a guard)?"""
        if case.guard is not None:
            guard = self.test(case.guard, fn)
            if guard is FALSE:
                return FALSE
            if guard is not TRUE:
                return UNKNOWN
        try:
            return self._pattern(self.value(subject, fn), case.pattern, fn)
        except Exception:
            return UNKNOWN

    def _pattern(self, subject: Value, pattern: ast.pattern, fn: Function | None) -> Verdict:
        if isinstance(pattern, ast.MatchAs) and pattern.pattern is None:
            return TRUE  # case _: / case name:
        if isinstance(pattern, ast.MatchAs) and pattern.pattern is not None:
            return self._pattern(subject, pattern.pattern, fn)
        if isinstance(pattern, ast.MatchOr):
            result: Verdict = FALSE
            for p in pattern.patterns:
                result = _or(result, self._pattern(subject, p, fn))
            return result
        if isinstance(pattern, ast.MatchValue | ast.MatchSingleton):
            value = (self.value(pattern.value, fn) if isinstance(pattern, ast.MatchValue)
                     else Const(pattern.value))
            return self._compare_one(ast.Eq(), subject, value)
        return UNKNOWN

    def empty_loop(self, it: ast.expr, fn: Function | None) -> bool:
        """``for ... in range(a, b)`` that runs no iteration under the profile."""
        if not (isinstance(it, ast.Call) and self.py.dotted(it.func) == "range"):
            return False
        try:
            args = [_plain(self.value(a, fn)) for a in it.args]
        except Exception:
            return False
        ints = [a for a in args if isinstance(a, int) and not isinstance(a, bool)]
        if not args or len(ints) != len(args):
            return False
        try:
            return len(range(*ints)) == 0
        except (TypeError, ValueError):
            return False

    # --- values --------------------------------------------------------------------------------

    def value(self, e: ast.AST, fn: Function | None, depth: int = 0) -> Value:
        if depth > MAX_DEPTH:
            self._cut = True
            return UNKNOWN
        d = depth + 1
        if isinstance(e, ast.Constant):
            return Const(e.value)
        if isinstance(e, ast.Tuple | ast.List | ast.Set):
            items = [self.value(x, fn, d) for x in e.elts]
            if all(isinstance(i, Const | DType) for i in items):
                plain = tuple(_plain(i) for i in items)
                return Const(frozenset(plain) if isinstance(e, ast.Set) else plain)
            return UNKNOWN
        if isinstance(e, ast.Dict):
            keys = [self.value(k, fn, d) if k is not None else UNKNOWN for k in e.keys]
            vals = [self.value(v, fn, d) for v in e.values]
            if all(isinstance(k, Const | DType) for k in keys):
                return Const({_plain(k): v for k, v in zip(keys, vals, strict=True)})
            return UNKNOWN
        if isinstance(e, ast.Name):
            return self.name(e.id, fn, d)
        if isinstance(e, ast.Attribute):
            return self._attribute(e, fn, d)
        if isinstance(e, ast.Call):
            return self._call(e, fn, d)
        if isinstance(e, ast.Compare):
            return self._compare(e, fn, d)
        if isinstance(e, ast.BoolOp):
            return _boolop(e, [truth(self.value(v, fn, d)) for v in e.values])
        if isinstance(e, ast.UnaryOp):
            v = self.value(e.operand, fn, d)
            if isinstance(e.op, ast.Not):
                t = truth(v)
                return Const(not t) if isinstance(t, bool) else t
            if isinstance(e.op, ast.USub) and isinstance(v, Const):
                return Const(-v.value)
            return v if v is VARIES else UNKNOWN
        if isinstance(e, ast.BinOp):
            return self._binop(e, fn, d)
        if isinstance(e, ast.Subscript):
            return self._subscript(e, fn, d)
        if isinstance(e, ast.IfExp):
            t = self.test(e.test, fn)
            if isinstance(t, bool):
                return self.value(e.body if t else e.orelse, fn, d)
            return UNKNOWN
        if isinstance(e, ast.NamedExpr):
            return self.value(e.value, fn, d)
        if isinstance(e, ast.Lambda):
            return LambdaRef(e)
        return UNKNOWN

    def name(self, name: str, fn: Function | None, depth: int = 0) -> Value:
        scope: Function | None = fn
        while scope is not None:
            if name in self._globals(scope):
                break
            if name in self._assigns.get(id(scope), {}) or name in _params(scope):
                return self._scoped(name, scope, depth)
            scope = self.py.enclosing(scope)
        if name in self._assigns.get(0, {}) and name not in self.py.state:
            return self._scoped(name, None, depth)
        if name in self.py.functions:
            return FunctionRef(name)
        if name in self.py.aliases:
            return Module(self.py.aliases[name])
        if name == "__name__":
            return Const("solution")  # imported by the harness, never run as __main__
        if name in ("True", "False", "None"):
            return Const({"True": True, "False": False, "None": None}[name])
        return UNKNOWN

    def _scoped(self, name: str, scope: Function | None, depth: int) -> Value:
        key = (id(scope) if scope is not None else 0, name)
        if key in self._names:
            return self._names[key]
        if key in self._active:  # x = x.contiguous(): the other assignments decide
            return UNKNOWN
        self._active.add(key)
        outer_cut, self._cut = self._cut, False
        try:
            values = []
            if key in self._mutated:  # ops = []; ops.append(...): not the empty list
                self._names[key] = UNKNOWN
                return UNKNOWN
            for node, target in self._assigns.get(key[0], {}).get(name, []):
                found = self._assigned(node, target, scope, depth)
                if found is UNKNOWN and _reads(node, name):
                    continue  # x = x.contiguous(): the other assignments decide
                values.append(found)
            if scope is not None and name in _params(scope):
                values.append(self._param(scope, name, depth))
            result = join(values)
        finally:
            self._active.discard(key)
            cut, self._cut = self._cut, outer_cut or self._cut
        if not cut:  # a value cut short by the depth is not the name's value
            self._names[key] = result
        return result

    def _assigned(self, node: ast.AST, target: ast.AST, scope: Function | None,
                  depth: int) -> Value:
        if isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
            if isinstance(node.iter, ast.Tuple | ast.List) and node.target is target and \
                    node.iter.elts:  # for t in (q, k, v): each of them in turn
                return join([self.value(e, scope, depth + 1) for e in node.iter.elts])
            return VARIES
        if isinstance(node, ast.AugAssign):
            return VARIES if self.py.in_loop(node) else UNKNOWN  # step += 1 in a loop
        if isinstance(node, ast.withitem):
            return UNKNOWN
        value = getattr(node, "value", None)
        if value is None:
            return UNKNOWN
        whole = getattr(node, "target", None) if isinstance(node, ast.AnnAssign | ast.NamedExpr) \
            else next(iter(getattr(node, "targets", [])), None)
        if whole is target:
            return self.value(value, scope, depth + 1)
        # a, b = x, y: element by element
        if isinstance(whole, ast.Tuple) and isinstance(value, ast.Tuple) and len(
                whole.elts) == len(value.elts):
            for t, v in zip(whole.elts, value.elts, strict=True):
                if t is target:
                    return self.value(v, scope, depth + 1)
        if isinstance(whole, ast.Tuple) and target in whole.elts:  # a, b = f(): a tuple
            found = self.value(value, scope, depth + 1)
            index = [id(t) for t in whole.elts].index(id(target))
            if isinstance(found, Const) and isinstance(found.value, tuple) and len(
                    found.value) == len(whole.elts):
                item = found.value[index]
                return item if isinstance(item, DType) else Const(item)
            if found is VARIES:
                return VARIES
            if isinstance(found, Tensor):  # q, k, v = qkv.chunk(3) / .unbind(0) / .split(n)
                return Tensor(found.dtype, None)
        return UNKNOWN

    def _param(self, fn: Function, name: str, depth: int) -> Value:
        key = (id(fn), name)
        if key in self._params:
            return self._params[key]
        self._params[key] = UNKNOWN  # recursion guard
        outer_cut, self._cut = self._cut, False
        try:
            result = self._param_value(fn, name, depth)
        finally:
            cut, self._cut = self._cut, outer_cut or self._cut
        if cut:
            del self._params[key]  # cut short by the depth: not the parameter's value
        else:
            self._params[key] = result
        return result

    def _param_value(self, fn: Function, name: str, depth: int) -> Value:
        args = fn.args
        positional = [*args.posonlyargs, *args.args]
        defaults = dict(zip([a.arg for a in positional][len(positional) - len(args.defaults):],
                            args.defaults, strict=True))
        defaults.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults,
                                                  strict=True) if d is not None})
        if name in RANK_NAMES:
            return VARIES
        if fn in self.py.solutions:
            if name in WORLD_NAMES:
                return Const(self.profile.world_size)
            if name in defaults:
                return self.value(defaults[name], None, depth + 1)
            arg = next((a for a in [*positional, *args.kwonlyargs] if a.arg == name), None)
            note = ast.unparse(arg.annotation) if arg is not None and arg.annotation else ""
            return self.input if not note or "Tensor" in note else UNKNOWN
        if name == "self":
            return UNKNOWN
        index = next((i for i, a in enumerate(positional) if a.arg == name), None)
        if self.py.is_method(fn) and index is not None:
            index -= 1
        found: list[Value] = []
        for call, caller in self.py.calls_of(fn):
            arg_node = next((k.value for k in call.keywords if k.arg == name), None)
            if arg_node is None and index is not None and 0 <= index < len(call.args) and not any(
                    isinstance(a, ast.Starred) for a in call.args[:index + 1]):
                arg_node = call.args[index]
            if arg_node is None and name in defaults:
                arg_node = defaults[name]
            found.append(self.value(arg_node, caller, depth + 1) if arg_node is not None
                         else UNKNOWN)
        if found:
            return join(found)
        if name in WORLD_NAMES:
            return Const(self.profile.world_size)
        return self.value(defaults[name], None, depth + 1) if name in defaults else UNKNOWN

    def _attribute(self, e: ast.Attribute, fn: Function | None, d: int) -> Value:
        dotted = self.py.dotted(e) or ""
        if dotted.startswith("torch.") and dotted.count(".") == 1:
            name = DTYPE_ALIASES.get(dotted[6:], dotted[6:])
            if name in ITEMSIZE:
                return DType(name)
        if dotted in MATH_CONSTANTS:
            return Const(MATH_CONSTANTS[dotted])
        if isinstance(e.value, ast.Name) and e.value.id in ("self", "cls"):
            found = self._self_attribute(e.attr, fn, d)
            if found is not UNKNOWN:
                return found
        if e.attr in RANK_NAMES:
            return VARIES  # hdl.rank, self.rank
        if e.attr in WORLD_NAMES:
            return Const(self.profile.world_size)  # hdl.world_size
        base = self.value(e.value, fn, d)
        if isinstance(base, Tensor):
            if e.attr == "dtype":
                return DType(base.dtype) if base.dtype else UNKNOWN
            if e.attr == "shape":
                return Const(base.shape) if base.shape is not None else UNKNOWN
            if e.attr == "is_cuda":
                return Const(True)
            if e.attr == "ndim":
                return Const(len(base.shape)) if base.shape is not None else UNKNOWN
            if e.attr in ("nbytes", "itemsize") and base.dtype is not None:
                size = ITEMSIZE[base.dtype]
                if e.attr == "itemsize":
                    return Const(size)
                return Const(math.prod(base.shape) * size) if base.shape is not None \
                    else UNKNOWN
            if e.attr == "device":
                return Const("cuda-device")
            if e.attr in ("T", "mT", "data", "real"):
                return Tensor(base.dtype, None)
        if isinstance(base, Module):
            return Module(f"{base.dotted}.{e.attr}")  # tl.bfloat16: some library object
        if isinstance(base, Const) and base.value == "cuda-device" and e.attr == "type":
            return Const("cuda")
        if isinstance(base, DType) and e.attr == "itemsize":
            return Const(ITEMSIZE[base.name])
        if isinstance(base, DType) and e.attr == "is_floating_point":
            return Const(base.name.startswith(("float", "bfloat")))
        if isinstance(base, Const) and isinstance(base.value, tuple) and e.attr in (
                "major", "minor") and len(base.value) == 2:
            return Const(base.value[0 if e.attr == "major" else 1])
        return UNKNOWN

    def _self_attribute(self, attr: str, fn: Function | None, d: int) -> Value:
        cls = self.py.class_of(fn) if fn is not None else None
        if cls is None or attr in self.py.self_state(cls):
            return UNKNOWN
        values = [self.value(v, m, d) for m, v in self.py.self_assignments(cls, attr)]
        return join(values) if values else UNKNOWN

    def _call(self, e: ast.Call, fn: Function | None, d: int) -> Value:
        dotted = self.py.dotted(e.func) or ""
        short = dotted.rsplit(".", 1)[-1] if dotted else (
            e.func.attr if isinstance(e.func, ast.Attribute) else "")
        p = self.profile
        fixed: dict[str, Value] = {"torch.cuda.is_available": Const(True),
                 "torch.distributed.is_initialized": Const(True),
                 "torch.distributed.is_available": Const(True),
                 "torch.distributed.is_nccl_available": Const(True),
                 "torch.distributed.get_world_size": Const(p.world_size),
                 "torch.distributed.get_rank": VARIES,
                 "torch.distributed.get_backend": Const("nccl"),
                 "torch.cuda.current_device": VARIES,
                 "torch.cuda.get_device_capability": Const(p.capability),
                 "torch.cuda.is_bf16_supported": Const(True),
                 "torch.is_tensor": Const(True)}
        if dotted in fixed:
            if dotted == "torch.is_tensor":
                arg = self.value(e.args[0], fn, d) if e.args else UNKNOWN
                return Const(isinstance(arg, Tensor)) if arg is not UNKNOWN else UNKNOWN
            return fixed[dotted]
        if dotted in ("os.environ.get", "os.getenv"):
            return self._environ(e, fn, d)
        if dotted in MATH_FUNCTIONS and len(e.args) == 1:
            number = _plain(self.value(e.args[0], fn, d))
            if isinstance(number, int | float) and not isinstance(number, bool):
                try:
                    return Const(MATH_FUNCTIONS[dotted](number))
                except (ValueError, OverflowError):
                    return UNKNOWN
            return UNKNOWN
        if dotted == "functools.partial" and e.args:
            return self.value(e.args[0], fn, d)  # partial(f, ...) calls f
        if isinstance(e.func, ast.Name) and e.func.id in self.py.functions and \
                e.func.id not in self.py.aliases:
            return self._returned(e.func.id, d)
        if dotted in ("int", "str", "float", "bool", "len", "min", "max", "abs", "isinstance",
                      "tuple", "range"):
            return self._builtin(dotted, e, fn, d)
        if dotted.startswith("torch.") and short in TENSOR_NEW | TENSOR_LIKE:
            return self._new_tensor(short, e, fn, d)
        if dotted.startswith("torch.") and short in TENSOR_OPS:  # torch.matmul(a, b)
            tensors = [v for v in (self.value(a, fn, d) for a in e.args[:2])
                       if isinstance(v, Tensor)]
            dtypes = {t.dtype for t in tensors}
            return Tensor(dtypes.pop(), None) if len(dtypes) == 1 else UNKNOWN
        if not isinstance(e.func, ast.Attribute):
            return UNKNOWN
        base = self.value(e.func.value, fn, d)
        if isinstance(base, Const) and isinstance(base.value, dict) and short == "get" and e.args:
            key = _plain(self.value(e.args[0], fn, d))
            if key is UNKNOWN:
                return UNKNOWN
            if key in base.value:
                found = base.value[key]
                return _as_value(found)
            return self.value(e.args[1], fn, d) if len(e.args) > 1 else Const(None)
        if not isinstance(base, Tensor):
            return UNKNOWN
        itemsize = ITEMSIZE.get(base.dtype or "", 0)
        numel = math.prod(base.shape) if base.shape is not None else None
        if short == "numel":
            return Const(numel) if numel is not None else UNKNOWN
        if short == "element_size":
            return Const(itemsize) if itemsize else UNKNOWN
        if short in ("dim", "ndimension"):
            return Const(len(base.shape)) if base.shape is not None else UNKNOWN
        if short == "size":
            if base.shape is None:
                return UNKNOWN
            if not e.args:
                return Const(base.shape)
            i = _plain(self.value(e.args[0], fn, d))
            return Const(base.shape[i]) if isinstance(i, int) and -len(base.shape) <= i < len(
                base.shape) else UNKNOWN
        if short in ("is_contiguous", "is_floating_point"):
            return Const(True) if short == "is_contiguous" else Const(
                (base.dtype or "").startswith(("float", "bfloat")))
        if short == "data_ptr":
            return Pointer()
        if short == "storage_offset":
            return Const(0)
        if short in ("float", "half", "bfloat16", "double"):
            return Tensor(DTYPE_ALIASES.get(short, short), base.shape)
        if short == "to":
            target = next((self.value(a, fn, d) for a in [*e.args, *(k.value for k in e.keywords
                                                                     if k.arg == "dtype")]
                           if isinstance(self.value(a, fn, d), DType)), None)
            return Tensor(target.name, base.shape) if isinstance(target, DType) else base
        if short in ("view", "reshape") and base.shape is not None and e.args and all(
                isinstance(a, ast.Constant | ast.UnaryOp | ast.Name | ast.BinOp | ast.Tuple)
                for a in e.args):
            return Tensor(base.dtype, self._reshaped(base.shape, e.args, fn, d))
        if short in ("flatten", "ravel") and not e.args and base.shape is not None:
            return Tensor(base.dtype, (math.prod(base.shape),))
        if short in TENSOR_SAME:
            return Tensor(base.dtype, base.shape if short in ("contiguous", "clone", "detach",
                                                              "cuda") else None)
        return UNKNOWN

    def _returned(self, name: str, d: int) -> Value:
        """What a function of this file returns: the join of its return expressions, read in
        its own scope (its parameters take what its callers pass)."""
        fns = self.py.functions.get(name, [])
        if len(fns) != 1 or d > MAX_DEPTH // 2:
            return UNKNOWN
        fn = fns[0]
        returns: list[ast.expr | None] = []
        self._returns(fn.body, fn, returns)
        if not returns or any(r is None for r in returns):
            return UNKNOWN
        return join([self.value(r, fn, d + 1) for r in returns if r is not None])

    def _returns(self, body: list[ast.stmt], fn: Function, out: list[ast.expr | None]) -> bool:
        """The return expressions the profile reaches in ``body``; True when it returns."""
        for stmt in body:
            if isinstance(stmt, ast.Return):
                out.append(stmt.value)
                return True
            if isinstance(stmt, ast.If):
                verdict = self.test(stmt.test, fn)
                if verdict is TRUE or verdict is FALSE:
                    if self._returns(stmt.body if verdict else stmt.orelse, fn, out):
                        return True
                    continue
                done = self._returns(stmt.body, fn, out)
                if self._returns(stmt.orelse, fn, out) and done:
                    return True
            elif isinstance(stmt, ast.For | ast.AsyncFor | ast.While | ast.With | ast.AsyncWith
                            | ast.Try):
                out.extend(n.value for n in ast.walk(stmt) if isinstance(n, ast.Return)
                           and self.py.scope_of(n) is fn)
        return False

    def _reshaped(self, shape: tuple[int, ...], args: list[ast.expr], fn: Function | None,
                  d: int) -> tuple[int, ...] | None:
        """``x.view(-1)``, ``x.reshape(w, -1)``: the new shape, one -1 inferred."""
        dims = [_plain(self.value(a, fn, d)) for a in args]
        if len(dims) == 1 and isinstance(dims[0], tuple):
            dims = list(dims[0])
        sizes = [x for x in dims if isinstance(x, int) and not isinstance(x, bool)]
        if len(sizes) != len(dims) or sizes.count(-1) > 1:
            return None
        total = math.prod(shape)
        known = math.prod(x for x in sizes if x != -1)
        if -1 in sizes:
            if known <= 0 or total % known:
                return None
            sizes = [total // known if x == -1 else x for x in sizes]
        return tuple(sizes) if math.prod(sizes) == total else None

    def _environ(self, e: ast.Call, fn: Function | None, d: int) -> Value:
        key = _plain(self.value(e.args[0], fn, d)) if e.args else UNKNOWN
        if key in ENV_WORLD:
            return Const(str(self.profile.world_size))
        if key in ENV_RANK:
            return VARIES
        if key is UNKNOWN:
            return UNKNOWN
        default = e.args[1] if len(e.args) > 1 else next(
            (k.value for k in e.keywords if k.arg == "default"), None)
        return self.value(default, fn, d) if default is not None else Const(None)

    def _builtin(self, name: str, e: ast.Call, fn: Function | None, d: int) -> Value:
        args = [self.value(a, fn, d) for a in e.args]
        if name == "isinstance" and len(args) == 2:
            cls = self.py.dotted(e.args[1]) or ""
            if isinstance(args[0], Tensor):
                return Const(cls in ("torch.Tensor", "torch.nn.Parameter") or None) \
                    if cls in ("torch.Tensor", "int", "float", "list", "tuple") else UNKNOWN
            return UNKNOWN
        if any(a is VARIES for a in args):
            return VARIES
        plain = [_plain(a) for a in args]
        if any(a is UNKNOWN for a in plain) or not plain:
            return UNKNOWN
        try:
            builtins: dict[str, Callable[..., Any]] = {
                "int": int, "str": str, "float": float, "bool": bool, "len": len,
                "min": min, "max": max, "abs": abs, "tuple": tuple,
                "range": lambda *a: tuple(range(*a))}
            return Const(builtins[name](*plain))
        except Exception:
            return UNKNOWN

    def _new_tensor(self, short: str, e: ast.Call, fn: Function | None, d: int) -> Value:
        dtype_node = next((k.value for k in e.keywords if k.arg == "dtype"), None)
        like = self.value(e.args[0], fn, d) if short in TENSOR_LIKE and e.args else None
        dtype = self.value(dtype_node, fn, d) if dtype_node is not None else None
        name = dtype.name if isinstance(dtype, DType) else (
            like.dtype if isinstance(like, Tensor) and dtype_node is None
            else "float32" if dtype_node is None and short in TENSOR_NEW else None)
        shape = like.shape if isinstance(like, Tensor) else None
        if short in TENSOR_NEW and e.args:
            dims = [_plain(self.value(a, fn, d)) for a in e.args]
            if len(dims) == 1 and isinstance(dims[0], tuple):
                dims = list(dims[0])
            sizes = [x for x in dims if isinstance(x, int)]
            if len(sizes) == len(dims):
                shape = tuple(sizes)
        return Tensor(name, shape)

    def _compare(self, e: ast.Compare, fn: Function | None, d: int) -> Value:
        left = self.value(e.left, fn, d)
        result: Verdict = TRUE
        for op, right_node in zip(e.ops, e.comparators, strict=True):
            right = self.value(right_node, fn, d)
            one = self._compare_one(op, left, right)
            result = _and(result, one)
            if result is FALSE:
                return Const(False)
            left = right
        return Const(result) if isinstance(result, bool) else result

    @staticmethod
    def _compare_one(op: ast.cmpop, left: Value, right: Value) -> Verdict:
        if left is VARIES or right is VARIES:
            return VARIES
        a, b = _plain(left), _plain(right)
        if isinstance(op, ast.Is | ast.IsNot) and (left is UNKNOWN or right is UNKNOWN):
            known = left if right is UNKNOWN else right
            other = right if right is UNKNOWN else left
            if isinstance(known, Const) and known.value is None and other is not UNKNOWN:
                return isinstance(op, ast.IsNot)
            return UNKNOWN
        if a is UNKNOWN or b is UNKNOWN:
            if isinstance(op, ast.Is | ast.IsNot) and isinstance(right, Const) and \
                    right.value is None and isinstance(left, Tensor | Pointer | DType | Module
                                                       | FunctionRef):
                return isinstance(op, ast.IsNot)
            return UNKNOWN
        try:
            return bool(_COMPARE[type(op)](a, b))
        except Exception:
            return UNKNOWN

    def _binop(self, e: ast.BinOp, fn: Function | None, d: int) -> Value:
        left, right = self.value(e.left, fn, d), self.value(e.right, fn, d)
        if isinstance(left, Tensor) or isinstance(right, Tensor):  # a @ b, x * 2
            dtypes = {v.dtype for v in (left, right) if isinstance(v, Tensor)}
            scalar = all(isinstance(v, Tensor | Const) for v in (left, right))
            return Tensor(dtypes.pop(), None) if len(dtypes) == 1 and scalar else UNKNOWN
        if isinstance(left, Pointer) and isinstance(right, Const) and isinstance(
                right.value, int) and right.value > 0:
            if isinstance(e.op, ast.Mod) and ALLOCATION_ALIGN_BYTES % right.value == 0:
                return Const(0)
            if isinstance(e.op, ast.BitAnd) and ALLOCATION_ALIGN_BYTES % (right.value + 1) == 0:
                return Const(0)
            return UNKNOWN
        if left is VARIES or right is VARIES:
            return VARIES
        a, b = _plain(left), _plain(right)
        if a is UNKNOWN or b is UNKNOWN or type(e.op) not in _BINARY:
            return UNKNOWN
        try:
            return Const(_BINARY[type(e.op)](a, b))
        except Exception:
            return UNKNOWN

    def _subscript(self, e: ast.Subscript, fn: Function | None, d: int) -> Value:
        dotted = self.py.dotted(e.value) or ""
        if dotted == "os.environ":
            key = _plain(self.value(e.slice, fn, d))
            return (Const(str(self.profile.world_size)) if key in ENV_WORLD
                    else VARIES if key in ENV_RANK else UNKNOWN)
        base = self.value(e.value, fn, d)
        if isinstance(base, Tensor):
            return Tensor(base.dtype, None)
        if base is VARIES:
            return VARIES
        index = self.value(e.slice, fn, d)
        if isinstance(base, Const) and isinstance(base.value, tuple | dict):
            key = _plain(index)
            if key is UNKNOWN:
                return VARIES if index is VARIES else UNKNOWN
            try:
                found = base.value[key]  # type: ignore[call-overload]
            except Exception:
                return UNKNOWN
            if isinstance(base.value, dict):
                return _as_value(found)
            return found if isinstance(found, DType) else Const(found)
        return UNKNOWN


VALUE_TYPES = (_Marker, DType, Tensor, Pointer, Module, FunctionRef, LambdaRef, Const)


def _as_value(found: object) -> Value:
    """A dict's entry: a value as evaluated, else unknown."""
    return found if isinstance(found, VALUE_TYPES) else UNKNOWN


def _and(a: Verdict, b: Verdict) -> Verdict:
    if a is FALSE or b is FALSE:
        return FALSE
    if a is UNKNOWN or b is UNKNOWN:
        return UNKNOWN
    if a is VARIES or b is VARIES:
        return VARIES
    return TRUE


def _or(a: Verdict, b: Verdict) -> Verdict:
    if a is TRUE or b is TRUE:
        return TRUE
    if a is UNKNOWN or b is UNKNOWN:
        return UNKNOWN
    if a is VARIES or b is VARIES:
        return VARIES
    return FALSE


def _boolop(e: ast.BoolOp, verdicts: list[Verdict]) -> Value:
    result: Verdict = TRUE if isinstance(e.op, ast.And) else FALSE
    for v in verdicts:
        result = _and(result, v) if isinstance(e.op, ast.And) else _or(result, v)
    return Const(result) if isinstance(result, bool) else result


MUTATORS = {"append", "extend", "update", "setdefault", "add", "insert", "pop", "clear",
            "remove", "discard", "popitem", "__setitem__"}


def _mutated(py: PythonModel) -> set[tuple[int, str]]:
    """(scope, name) of names changed in place: ``x.append(v)``, ``x[k] = v``, ``del x[k]``."""
    out: set[tuple[int, str]] = set()
    for node in py.all_nodes:
        base: ast.AST | None = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in MUTATORS:
            base = node.func.value
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store | ast.Del):
            base = node.value
        if isinstance(base, ast.Name):
            scope = py.scope_of(node)
            while scope is not None and base.id not in {
                    t.id for n in ast.walk(scope) if isinstance(n, ast.Assign)
                    for t in n.targets if isinstance(t, ast.Name)} | _params(scope):
                scope = py.enclosing(scope)
            out.add((id(scope) if scope is not None else 0, base.id))
    return out


def _reads(node: ast.AST, name: str) -> bool:
    value = getattr(node, "value", None)
    return value is not None and any(isinstance(n, ast.Name) and n.id == name
                                     for n in ast.walk(value))


def _globals(fn: Function) -> set[str]:
    return {n for g in ast.walk(fn) if isinstance(g, ast.Global | ast.Nonlocal) for n in g.names}


def _params(fn: Function) -> set[str]:
    a = fn.args
    names = {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs]}
    return names | {x.arg for x in (a.vararg, a.kwarg) if x is not None}


def _assignments(py: PythonModel) -> dict[int, dict[str, list[tuple[ast.AST, ast.AST]]]]:
    """Per scope (id of the function, 0 for the module): name -> [(assigning node, target)],
    leaving out assignments in ``except`` bodies when the name has others."""
    out: dict[int, dict[str, list[tuple[ast.AST, ast.AST]]]] = {}
    handled: dict[int, dict[str, list[tuple[ast.AST, ast.AST]]]] = {}
    for node in py.all_nodes:
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AnnAssign | ast.AugAssign | ast.NamedExpr | ast.For
                        | ast.AsyncFor | ast.comprehension):
            targets = [node.target]
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            targets = [node.optional_vars]
        if not targets:
            continue
        scope = py.scope_of(node)
        key = id(scope) if scope is not None else 0
        in_handler = py.in_except(node)
        for target in targets:
            for t in ast.walk(target):
                if isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store):
                    (handled if in_handler else out).setdefault(key, {}).setdefault(
                        t.id, []).append((node, t))
    for key, names in handled.items():
        for name, found in names.items():
            out.setdefault(key, {}).setdefault(name, found) if name not in out.get(
                key, {}) else None
    return out
