"""The size rule of issue 32: a collective whose sent tensor is metadata by its size.

A torch.distributed collective or point-to-point call is ``nccl_metadata`` when the tensor it
sends (the input: for ``all_gather(list, t)`` the ``t``, for ``all_to_all_single(out, inp)``
the ``inp``) has a number of elements that does not depend on the sizes of ``solution()``'s
tensor arguments and is at most MAX_METADATA_ELEMENTS under the profile
(tests/data/inspect_eval/README.md, "Metadata or payload: the size rule").

:class:`Sizes` bounds a tensor expression the way the profile's evaluator reads values
(pkbsim/inspection/profile.py): names are followed to their assignments (flow-insensitively,
in-place updates keeping the count), a helper's parameter to what its callers pass and a call
of a helper of the file to what it returns. A bound is built from

- Python values: ``torch.tensor([n])``, ``torch.tensor(counts)`` with ``counts`` a list of
  bounded length (a literal, ``[0] * W``, a comprehension over ``range(W)``, appends in a
  bounded loop), ``as_tensor``, ``x.new_tensor``;
- factories whose sizes are integers the profile gives without the inputs' sizes (literals,
  module constants, the world size, sums and products of these): ``torch.empty(1)``,
  ``torch.zeros(W, dtype=torch.int64)``, ``torch.arange(W)``, ``zeros_like`` of a bounded tensor;
- full reductions (no ``dim``): ``.sum()``, ``.max()``, ``.norm()``, ``torch.linalg.vector_norm``,
  a loss reduced by its default mean;
  ``torch.stack``/``torch.cat`` of a bounded list of bounded tensors; ``bincount(minlength=K)``
  and ``histc(bins=K)``;
- any of these through views, casts, copies, element-wise arithmetic with a scalar, indexing
  and in-place updates.

"Without the inputs' sizes" is checked by evaluating every integer twice: under the profile
and under the same profile with other input shapes (ALT_SHAPE); a number both give alike is
one the inputs' sizes do not decide (``x.size(0) // W`` differs, ``W`` does not).
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from pkbsim.inspection.profile import ITEMSIZE, VARIES, Const, DType, Evaluator, Tensor
from pkbsim.inspection.python_model import Function, PythonModel, last_name

MAX_METADATA_ELEMENTS = 4096  # at most this many elements under the profile: metadata
ALT_SHAPE = (3072, 40)  # other input sizes: a count that changes with them depends on them
MAX_DEPTH = 24

# the sent tensor is the second argument (or this keyword) of these torch.distributed calls
SECOND_ARG = {"all_gather": "tensor", "all_gather_into_tensor": "input_tensor",
              "_all_gather_base": "input_tensor", "all_to_all_single": "input",
              "reduce_scatter_tensor": "input", "_reduce_scatter_base": "input",
              "all_to_all": "input_tensor_list", "reduce_scatter": "input_list"}
LIST_INPUT = {"all_to_all", "reduce_scatter"}  # a list of tensors is sent
FIRST_KEYWORDS = ("tensor", "input", "self", "inp")
NOT_BOUNDED = {"all_gather_coalesced", "all_reduce_coalesced"}
DATA_TENSORS = {"tensor", "as_tensor", "asarray", "new_tensor", "LongTensor", "IntTensor",
                "FloatTensor", "DoubleTensor", "HalfTensor", "BoolTensor", "ByteTensor",
                "Tensor"}
TENSOR_DTYPES = {"LongTensor": "int64", "IntTensor": "int32", "FloatTensor": "float32",
                 "DoubleTensor": "float64", "HalfTensor": "float16", "BoolTensor": "bool",
                 "ByteTensor": "uint8"}
FACTORIES = {"empty", "zeros", "ones", "full", "rand", "randn", "randint", "empty_strided",
             "new_empty", "new_zeros", "new_ones", "new_full"}
LIKE = {"empty_like", "zeros_like", "ones_like", "full_like", "rand_like", "randn_like"}
REDUCTIONS = {"sum", "mean", "max", "min", "amax", "amin", "norm", "any", "all", "prod",
              "nansum", "nanmean", "count_nonzero", "std", "var", "median", "dot", "vdot",
              "vector_norm"}
LOSSES = {"cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
          "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div",
          "clip_grad_norm_", "get_total_norm"}  # one element (a loss reduced, a total norm)
P_FIRST = {"norm", "vector_norm"}  # the first argument after the tensor is p, not dim
STACKS = {"stack", "cat", "concat", "concatenate", "hstack", "vstack"}
CASTS = {"float": "float32", "double": "float64", "half": "float16", "bfloat16": "bfloat16",
         "long": "int64", "int": "int32", "short": "int16", "bool": "bool", "byte": "uint8",
         "char": "int8"}
KEEPS = {"view", "reshape", "unsqueeze", "squeeze", "flatten", "ravel", "contiguous", "clone",
         "detach", "to", "cuda", "cpu", "view_as", "reshape_as", "t", "transpose", "permute",
         "type", "abs", "neg", "sqrt", "rsqrt", "exp", "log", "log2", "sign", "square",
         "reciprocal", "clamp", "clamp_min", "clamp_max", "pow", "sigmoid", "tanh", "relu",
         "nan_to_num", "isfinite", "isnan", "isinf", "logical_not", "mul", "div", "add", "sub",
         "requires_grad_", "pin_memory", "sort", "cumsum", "flip", "roll"}
BINARY = {"maximum", "minimum", "fmax", "fmin", "add", "sub", "mul", "div", "pow", "atan2",
          "hypot", "logical_and", "logical_or", "eq", "ne", "lt", "le", "gt", "ge"}
SPLITS = {"chunk", "split", "tensor_split", "unbind"}
SCALAR_CALLS = {"int", "float", "bool", "len", "sum", "min", "max", "abs", "round", "divmod"}
METHOD_SCALARS = {"item", "numel", "dim", "element_size", "data_ptr", "nelement", "ndimension",
                  "get_rank", "get_world_size", "bit_length", "is_integer"}
INTEGER_SCALARS = {"int", "len", "numel", "dim", "element_size", "data_ptr", "nelement",
                   "ndimension", "get_rank", "get_world_size", "ceil", "floor", "size"}


@dataclass(frozen=True)
class Bound:
    """A tensor's element count, the same whatever the inputs' sizes, and its dtype."""

    elements: int
    dtype: str | None = None


Reader = Callable[[ast.AST, "Function | None", int], "Bound | None"]


def _join(bounds: list[Bound | None]) -> Bound | None:
    """One bound for several values: the largest count; the dtype when they agree."""
    if not bounds or any(b is None for b in bounds):
        return None
    found = [b for b in bounds if b is not None]
    dtypes = {b.dtype for b in found}
    return Bound(max(b.elements for b in found), dtypes.pop() if len(dtypes) == 1 else None)


class Sizes:
    """Element-count bounds of a file's tensor expressions (module docstring)."""

    def __init__(self, py: PythonModel) -> None:
        self.py = py
        self.evs = (py.ev, Evaluator(py, replace(py.profile, shape=ALT_SHAPE)))
        self._active: set[tuple[int, str]] = set()
        self._names: dict[tuple[int, str], Bound | None] = {}
        self._binding: dict[tuple[int, str], Bound] = {}  # a name read inside its own value
        self._attrs: dict[str, list[tuple[Function | None, ast.expr]]] | None = None

    # --- the call ------------------------------------------------------------------------

    def sent(self, call: ast.Call, name: str, short: str, fn: Function | None) -> Bound | None:
        """The bound of what a torch.distributed call sends, if the size rule makes it
        metadata (at most MAX_METADATA_ELEMENTS); else None."""
        if short in NOT_BOUNDED:
            return None
        try:
            if short == "batch_isend_irecv":
                found = self._p2p_ops(call, fn)
            else:
                arg = _sent_arg(call, name, short)
                if arg is None:
                    return None
                found = (self.sequence(arg, fn, 0) if short in LIST_INPUT and name.startswith(
                    "torch.distributed.") else self.tensor(arg, fn, 0))
        except RecursionError:
            raise
        except Exception:
            return None
        return found if found is not None and found.elements <= MAX_METADATA_ELEMENTS else None

    def _p2p_ops(self, call: ast.Call, fn: Function | None) -> Bound | None:
        """``batch_isend_irecv(ops)``: every ``P2POp(op, tensor, peer)`` the list holds."""
        arg = call.args[0] if call.args else next(
            (k.value for k in call.keywords if k.arg == "p2p_op_list"), None)
        if arg is None:
            return None

        def item(e: ast.AST, f: Function | None, d: int) -> Bound | None:
            if not (isinstance(e, ast.Call) and last_name(e.func) == "P2POp"):
                return None
            t = e.args[1] if len(e.args) > 1 else next(
                (k.value for k in e.keywords if k.arg == "tensor"), None)
            return self.tensor(t, f, d) if t is not None else None

        return self.sequence(arg, fn, 0, item)

    # --- tensors -------------------------------------------------------------------------

    def tensor(self, e: ast.AST, fn: Function | None, d: int) -> Bound | None:
        """The bound of a tensor expression, None when the rule cannot bound it."""
        if d > MAX_DEPTH:
            return None
        d += 1
        if isinstance(e, ast.Name):
            return self._name(e.id, fn, d, self.tensor)
        if isinstance(e, ast.Attribute):
            return self._attribute(e, fn, d, self.tensor)
        if isinstance(e, ast.NamedExpr):
            return self.tensor(e.value, fn, d)
        if isinstance(e, ast.IfExp):
            return _join([self.tensor(e.body, fn, d), self.tensor(e.orelse, fn, d)])
        if isinstance(e, ast.UnaryOp):
            return self.tensor(e.operand, fn, d)
        if isinstance(e, ast.BinOp):
            return self._arithmetic(e, fn, d)
        if isinstance(e, ast.Subscript):
            return self._indexed(e, fn, d)
        if isinstance(e, ast.Call):
            return self._call(e, fn, d)
        return None

    def _call(self, e: ast.Call, fn: Function | None, d: int) -> Bound | None:
        dotted = self.py.dotted(e.func) or ""
        short = last_name(e.func)
        receiver = e.func.value if isinstance(e.func, ast.Attribute) else None
        torch_fn = dotted.startswith("torch.") and (receiver is None or self._module(receiver))
        if receiver is not None and not torch_fn and self._module(receiver):
            return None  # a library other than torch
        known = short in DATA_TENSORS | FACTORIES | LIKE | REDUCTIONS | STACKS | KEEPS | LOSSES \
            | set(CASTS) | {"arange", "bincount", "histc"} or short.endswith("_")
        callees = self.py.callees(e, fn) if isinstance(e.func, ast.Name) or not known else []
        if callees and not torch_fn:
            return _join([self._returned(f, d) for f in callees])
        kw = {k.arg: k.value for k in e.keywords if k.arg and not (
            isinstance(k.value, ast.Constant) and k.value.value is None)}
        if short in DATA_TENSORS and (torch_fn or short == "new_tensor"):
            data = e.args[0] if e.args else kw.get("data")
            if data is None:
                return None
            count = self.count(data, fn, d)
            if count is None:
                return None
            dtype = self._dtype_kw(kw, fn) or TENSOR_DTYPES.get(short) or self._data_dtype(
                data, fn)
            return Bound(count, dtype)
        if short in FACTORIES and (torch_fn or short.startswith("new_")):
            made = self._factory(short, e, kw, fn)
            if made is not None and made.dtype is None and receiver is not None and not torch_fn:
                return Bound(made.elements, self._dtype(receiver, fn))  # x.new_zeros(W)
            return made
        if short == "arange" and torch_fn:
            ints = [self.integer(a, fn) for a in e.args]
            if not ints or None in ints:
                return None
            try:
                n = len(range(*[i for i in ints if i is not None]))
            except (TypeError, ValueError):
                return None
            return Bound(n, self._dtype_kw(kw, fn) or "int64")
        if short in LIKE and torch_fn and e.args:
            like = self.tensor(e.args[0], fn, d)
            return Bound(like.elements, self._dtype_kw(kw, fn) or like.dtype) if like else None
        if short in ("bincount", "histc"):
            return self._counts(short, e, kw, fn, receiver if not torch_fn else None)
        if short in STACKS and torch_fn:
            seq = e.args[0] if e.args else kw.get("tensors")
            return self.sequence(seq, fn, d) if seq is not None else None
        if short in BINARY and torch_fn and len(e.args) == 2:
            return self._arithmetic(ast.BinOp(e.args[0], ast.Add(), e.args[1]), fn, d)
        operand = receiver if not torch_fn else (e.args[0] if e.args else kw.get("input"))
        extra = list(e.args) if not torch_fn else list(e.args[1:])
        if short in REDUCTIONS and operand is not None:
            return self._reduced(short, operand, extra, kw, fn, d)
        if short in LOSSES and torch_fn and e.args:  # reduction "mean" (the default) or "sum"
            reduction = kw.get("reduction")
            how = self.py.ev.value(reduction, fn) if reduction is not None else None
            if how is None or (isinstance(how, Const) and how.value in ("mean", "sum",
                                                                      "batchmean")):
                return Bound(1, self._dtype(e.args[0], fn))
            return None
        if operand is None:
            return None
        if short in CASTS and not torch_fn and not extra:
            base = self.tensor(operand, fn, d)
            return Bound(base.elements, CASTS[short]) if base else None
        if short in KEEPS or (short.endswith("_") and not short.startswith("_")):
            return self._kept(short, operand, extra, kw, fn, d)
        return None

    def _factory(self, short: str, e: ast.Call, kw: dict[str, ast.expr], fn: Function | None
                 ) -> Bound | None:
        args = list(e.args)
        if short == "randint":  # randint(high, size) / randint(low, high, size)
            args = [kw["size"]] if "size" in kw else args[-1:]
        elif short in ("full", "new_full", "empty_strided"):
            args = args[:1]
        if not args and "size" in kw:
            args = [kw["size"]]
        dims: list[int] = []
        for a in args:
            sizes = self._sizes(a, fn)
            if sizes is None:
                return None
            dims += sizes
        if not args:
            return None
        dtype = self._dtype_kw(kw, fn)
        if dtype is None and short in ("full", "new_full"):
            fill = e.args[1] if len(e.args) > 1 else kw.get("fill_value")
            dtype = self._data_dtype(fill, fn) if fill is not None else None
        elif dtype is None and short == "randint":
            dtype = "int64"
        elif dtype is None and not short.startswith("new_"):
            dtype = "float32"
        return Bound(math.prod(dims), dtype)

    def _sizes(self, a: ast.AST, fn: Function | None) -> list[int] | None:
        """A size argument: an integer or a tuple of them, the same under both shapes."""
        values = [ev.value(a, fn) for ev in self.evs]
        plain = [v.value if isinstance(v, Const) else None for v in values]
        if plain[0] is None or plain[0] != plain[1]:
            return None
        found = plain[0]
        items = list(found) if isinstance(found, tuple | list) else [found]
        if not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in items):
            return None
        return items

    def _counts(self, short: str, e: ast.Call, kw: dict[str, ast.expr], fn: Function | None,
                receiver: ast.expr | None) -> Bound | None:
        """``bincount(idx, minlength=K)``, ``histc(x, bins=K)`` (bins default 100)."""
        at = 0 if receiver is not None else 1
        if short == "bincount":
            k_node = kw.get("minlength", e.args[at + 1] if len(e.args) > at + 1 else None)
            k = self.integer(k_node, fn) if k_node is not None else None
            return Bound(k, "int64") if k else None
        k_node = kw.get("bins", e.args[at] if len(e.args) > at else None)
        k = self.integer(k_node, fn) if k_node is not None else 100
        operand = receiver if receiver is not None else (e.args[0] if e.args else None)
        dtype = self._dtype(operand, fn) if operand is not None else None
        return Bound(k, dtype) if k else None

    def _reduced(self, short: str, operand: ast.expr, extra: list[ast.expr],
                 kw: dict[str, ast.expr], fn: Function | None, d: int) -> Bound | None:
        """A reduction to one element: no ``dim`` given (``x.norm(2)`` gives p, not dim)."""
        if short in ("dot", "vdot"):
            return Bound(1, self._dtype(operand, fn))
        dims = extra[1:] if short in P_FIRST else extra
        if dims or kw.get("dim") is not None or kw.get("axis") is not None:
            if short in ("max", "min") or not dims:
                return None
            if all(isinstance(x, ast.Constant) and x.value is None for x in dims):
                dims = []  # norm(p, None): every element
            else:
                return None
        dtype = self._dtype_kw(kw, fn)
        if short in ("any", "all"):
            dtype = "bool"
        elif short == "count_nonzero":
            dtype = "int64"
        elif dtype is None:
            dtype = self._dtype(operand, fn)
            if short in ("sum", "prod") and dtype in ("bool", "uint8", "int8", "int16",
                                                      "int32"):
                dtype = "int64"
        return Bound(1, dtype)

    def _kept(self, short: str, operand: ast.expr, extra: list[ast.expr],
              kw: dict[str, ast.expr], fn: Function | None, d: int) -> Bound | None:
        """Views, casts, copies, element-wise ops and in-place updates keep the count."""
        base = self.tensor(operand, fn, d)
        if base is None:
            return None
        if short in ("mul", "div", "add", "sub", "pow") and extra and not self._scalar(
                extra[0], fn):
            other = self.tensor(extra[0], fn, d)
            return Bound(base.elements * other.elements, base.dtype) if other else None
        if short in ("to", "type", "view") and extra:
            dtype = next((v.name for v in (self.py.ev.value(a, fn) for a in extra)
                          if isinstance(v, DType)), None)
            if dtype is not None and short == "view":  # a bit cast: x.view(torch.uint8)
                if base.dtype is None or base.dtype not in ITEMSIZE:
                    return None
                size = base.elements * ITEMSIZE[base.dtype]
                return Bound(size // ITEMSIZE[dtype], dtype) if size % ITEMSIZE[
                    dtype] == 0 else None
            if dtype is not None:
                return Bound(base.elements, dtype)
        if short in ("to", "type") and "dtype" in kw:
            return Bound(base.elements, self._dtype_kw(kw, fn))
        return base

    def _arithmetic(self, e: ast.BinOp, fn: Function | None, d: int) -> Bound | None:
        """Element-wise: a tensor with a scalar keeps its count; two bounded tensors broadcast
        to at most the product of theirs."""
        sides = [e.left, e.right]
        scalar = [self._scalar(s, fn) for s in sides]
        if all(scalar):
            return None
        bounds = [None if s else self.tensor(x, fn, d) for x, s in zip(sides, scalar,
                                                                        strict=True)]
        if any(b is None and not s for b, s in zip(bounds, scalar, strict=True)):
            return None
        found = [b for b in bounds if b is not None]
        dtypes = {b.dtype for b in found}
        return Bound(math.prod(b.elements for b in found),
                     dtypes.pop() if len(dtypes) == 1 else None)

    def _indexed(self, e: ast.Subscript, fn: Function | None, d: int) -> Bound | None:
        """An element, row or slice of a bounded tensor: at most its count (not an index by a
        tensor or a list, which may repeat elements)."""
        index = e.slice.elts if isinstance(e.slice, ast.Tuple) else [e.slice]
        for i in index:
            if isinstance(i, ast.Slice | ast.Constant) or self._scalar(i, fn):
                continue
            if self.py.ev.value(i, fn) is not VARIES:
                return None  # an index tensor or list may repeat elements
        base = self.tensor(e.value, fn, d)
        if base is not None:
            return base
        seq = self.sequence(e.value, fn, d)  # a bounded list of tensors: each element too
        return seq

    def _returned(self, f: Function, d: int) -> Bound | None:
        returns = [n.value for n in ast.walk(f) if isinstance(n, ast.Return)
                   and self.py.scope_of(n) is f]
        if not returns or any(r is None for r in returns):
            return None
        return _join([self.tensor(r, f, d) for r in returns if r is not None])

    # --- names ---------------------------------------------------------------------------

    def _name(self, name: str, fn: Function | None, d: int, read: Reader,
              mode: str = "tensor") -> Bound | None:
        """A name's bound: the join over its assignments (and a parameter's arguments),
        each read by ``read``; ``mode`` names the reading (tensor, count, length...)."""
        scope, found = self._assignments(name, fn)
        bound = self._binding.get((id(scope) if scope is not None else 0, name))
        if bound is not None and mode == "tensor":
            return bound
        memo = (id(scope) if scope is not None else 0, f"{mode}:{name}")
        if memo in self._names:
            return self._names[memo]
        if memo in self._active:
            return None
        self._active.add(memo)
        try:
            result = self._name_value(name, scope, found, d, read)
        finally:
            self._active.discard(memo)
        if d <= 2 and not self._binding:  # not cut short by the depth limit or a binding
            self._names[memo] = result
        return result

    def _name_value(self, name: str, scope: Function | None,
                    found: list[tuple[ast.AST, ast.AST, Function | None]], d: int,
                    read: Reader) -> Bound | None:
        """Flow-insensitively: the join of every assignment. One made from the name itself
        (``s = s / W``, ``t = t.float()``) is read with the name bound to the others' join;
        inside a loop it may not grow (``t = torch.cat([t, t])``). A parameter counts unless
        the function assigns the name a value of its own."""
        bounds: list[Bound | None] = []
        later: list[tuple[ast.AST, ast.AST, Function | None]] = []
        fresh = False  # assigned a value not made from itself: a parameter's value is replaced
        for node, target, where in found:
            value = self._assigned_value(node, target)
            if value is _INPLACE:
                continue
            if not isinstance(value, ast.AST):
                if isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
                    bounds.append(self._loop_item(node, where, d, read))
                    continue
                got = self._unpacked(node, target, where, d, read)
                if got is None:
                    return None
                bounds.append(got)
                fresh = True
                continue
            if isinstance(value, ast.Constant) and value.value is None:
                continue  # a cache holder: _flag = None
            got = read(value, where, d)  # the name itself reads as unknown here
            if got is None and _reads(node, name):
                later.append((node, value, where))
                continue
            fresh = True
            bounds.append(got)
        if scope is not None and name in _params(scope) and not fresh:
            bounds.append(self._parameter(scope, name, d, read))
        base = _join(bounds)
        if not later:
            return base
        if base is None:
            return None
        memo = (id(scope) if scope is not None else 0, name)
        self._binding[memo] = base
        try:
            grown = [(node, read(value, where, d)) for node, value, where in later]
        finally:
            del self._binding[memo]
        for node, got in grown:
            if got is None or (got.elements > base.elements and self.py.in_loop(node)):
                return None
        return _join([base, *(g for _, g in grown)])

    def _unpacked(self, node: ast.AST, target: ast.AST, where: Function | None, d: int,
                  read: Reader) -> Bound | None:
        """``a, b = helper(...)``: element i of each tuple the helper returns."""
        whole = next(iter(getattr(node, "targets", [])), None)
        value = getattr(node, "value", None)
        if not (isinstance(node, ast.Assign) and isinstance(whole, ast.Tuple)
                and isinstance(value, ast.Call) and target in whole.elts):
            return None
        index = [id(t) for t in whole.elts].index(id(target))
        callees = self.py.callees(value, where)
        found: list[Bound | None] = []
        for f in callees:
            for r in _returns(self.py, f):
                if not (isinstance(r, ast.Tuple) and len(r.elts) == len(whole.elts)):
                    return None
                found.append(read(r.elts[index], f, d))
        return _join(found) if found else None

    def _assignments(self, name: str, fn: Function | None
                     ) -> tuple[Function | None, list[tuple[ast.AST, ast.AST, Function | None]]]:
        """The scope ``name`` resolves to from ``fn`` and its assignments there (a global's:
        the module's and those of functions declaring it global)."""
        assigns = self.py.ev._assigns
        scope: Function | None = fn
        while scope is not None:
            if name in self.py.ev._globals(scope):
                break
            if name in assigns.get(id(scope), {}) or name in _params(scope):
                return scope, [(n, t, scope) for n, t in assigns.get(id(scope), {}).get(
                    name, [])]
            scope = self.py.enclosing(scope)
        found: list[tuple[ast.AST, ast.AST, Function | None]] = [
            (n, t, None) for n, t in assigns.get(0, {}).get(name, [])]
        for f in self.py.all_functions():
            if name in self.py.ev._globals(f):
                found += [(n, t, f) for n, t in assigns.get(id(f), {}).get(name, [])]
        return None, found

    @staticmethod
    def _assigned_value(node: ast.AST, target: ast.AST) -> object:
        """The expression assigned to ``target`` by ``node``; _INPLACE for ``t += 1``."""
        if isinstance(node, ast.AugAssign):
            return _INPLACE
        value = getattr(node, "value", None)
        if value is None or isinstance(node, ast.For | ast.AsyncFor | ast.comprehension
                                       | ast.withitem):
            return None
        whole = getattr(node, "target", None) if isinstance(node, ast.AnnAssign | ast.NamedExpr) \
            else next(iter(getattr(node, "targets", [])), None)
        if isinstance(node, ast.Assign) and any(t is target for t in node.targets):
            return value
        if whole is target:
            return value
        if isinstance(whole, ast.Tuple) and isinstance(value, ast.Tuple) and len(
                whole.elts) == len(value.elts):
            for t, v in zip(whole.elts, value.elts, strict=True):
                if t is target:
                    return v
        return None

    def _loop_item(self, node: ast.For | ast.AsyncFor | ast.comprehension,
                   where: Function | None, d: int, read: Reader) -> Bound | None:
        """``for t in (a, b)``: each of them in turn; ``for r in range(n)``: a number."""
        if isinstance(node.iter, ast.Tuple | ast.List) and isinstance(node.target, ast.Name):
            return _join([read(e, where, d) for e in node.iter.elts])
        if isinstance(node.iter, ast.Call) and last_name(node.iter.func) == "range" and \
                isinstance(node.target, ast.Name):
            return Bound(1, "int64")
        return None

    def _parameter(self, fn: Function, name: str, d: int, read: Reader) -> Bound | None:
        """A parameter: ``solution()``'s are the inputs (or their defaults); a helper's take
        what every caller passes (or the default)."""
        args = fn.args
        positional = [*args.posonlyargs, *args.args]
        defaults = dict(zip([a.arg for a in positional][len(positional) - len(args.defaults):],
                            args.defaults, strict=True))
        defaults.update({a.arg: v for a, v in zip(args.kwonlyargs, args.kw_defaults,
                                                  strict=True) if v is not None})
        calls = self.py.calls_of(fn)
        if fn in self.py.solutions or not calls:
            default = defaults.get(name)
            return read(default, None, d) if default is not None else None
        index = next((i for i, a in enumerate(positional) if a.arg == name), None)
        if index is not None and self.py.is_method(fn):
            index -= 1
        found: list[Bound | None] = []
        for call, caller in calls:
            arg = next((k.value for k in call.keywords if k.arg == name), None)
            if arg is None and index is not None and 0 <= index < len(call.args) and not any(
                    isinstance(a, ast.Starred) for a in call.args[:index + 1]):
                arg = call.args[index]
            if arg is None:
                arg = defaults.get(name)
            if isinstance(arg, ast.Constant) and arg.value is None:
                continue
            found.append(read(arg, caller, d) if arg is not None else None)
        return _join(found)

    def _attribute(self, e: ast.Attribute, fn: Function | None, d: int, read: Reader
                   ) -> Bound | None:
        """``self.x``, ``obj.x``: what the file assigns to an attribute of that name anywhere
        (``self.x = ...``, ``plan.x = ...``); ``t.data``, ``t.T`` of a bounded tensor."""
        if e.attr in ("data", "T", "mT", "real", "values"):
            return read(e.value, fn, d)
        if self._attrs is None:  # attribute name -> (function, value) of each assignment
            self._attrs = {}
            for n in self.py.all_nodes:
                if isinstance(n, ast.Assign) and not (isinstance(n.value, ast.Constant)
                                                      and n.value.value is None):
                    for t in n.targets:
                        if isinstance(t, ast.Attribute):
                            self._attrs.setdefault(t.attr, []).append(
                                (self.py.scope_of(n), n.value))
        values = self._attrs.get(e.attr, [])
        if not values:
            return None
        return _join([read(v, f, d) for f, v in values])

    # --- Python values and lists -----------------------------------------------------------

    def count(self, e: ast.AST, fn: Function | None, d: int) -> int | None:
        """How many numbers a Python value given to ``torch.tensor`` holds."""
        if d > MAX_DEPTH:
            return None
        d += 1
        if isinstance(e, ast.Constant):
            return 1
        if isinstance(e, ast.List | ast.Tuple | ast.Set):
            parts = [self.count(x.value if isinstance(x, ast.Starred) else x, fn, d)
                     for x in e.elts]
            return None if None in parts else sum(p for p in parts if p is not None)
        if isinstance(e, ast.ListComp | ast.GeneratorExp | ast.SetComp):
            n = self._iterations(e.generators, fn, d)
            item = self.count(e.elt, fn, d)
            return n * item if n is not None and item is not None else None
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Mult) and _listy(e.left, e.right):
            lst, k = (e.left, e.right) if _listy(e.left) else (e.right, e.left)
            n, times = self.count(lst, fn, d), self.integer(k, fn)
            return n * times if n is not None and times is not None else None
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add) and _listy(e.left, e.right):
            parts = [self.count(e.left, fn, d), self.count(e.right, fn, d)]
            return None if None in parts else sum(p for p in parts if p is not None)
        if self._scalar(e, fn):
            return 1
        if isinstance(e, ast.IfExp):
            parts = [self.count(e.body, fn, d), self.count(e.orelse, fn, d)]
            return None if None in parts else max(p for p in parts if p is not None)
        if isinstance(e, ast.Name):
            same = self._ev_count(e, fn)
            if same is not None:
                return same
            if self._mutated(e.id, fn):
                return _elements(self._appended(e.id, fn, d, self._count_bound,
                                                self._count_bound))
            return _elements(self._name(e.id, fn, d, self._count_bound, "count"))
        if isinstance(e, ast.Call):
            short = last_name(e.func)
            if short in ("list", "tuple", "sorted", "reversed") and len(e.args) == 1:
                return self.count(e.args[0], fn, d)
            if short == "range":
                return self._range(e, fn)
            if short == "tolist" and isinstance(e.func, ast.Attribute):
                return _elements(self.tensor(e.func.value, fn, d))
        if isinstance(e, ast.Subscript | ast.Attribute):
            same = self._ev_count(e, fn)
            if same is not None:
                return same
        return _elements(self.tensor(e, fn, d))  # torch.tensor(t): a copy of t

    def _ev_count(self, e: ast.AST, fn: Function | None) -> int | None:
        """The count of a Python value both input shapes give the same number of numbers."""
        counts = []
        for ev in self.evs:
            value = ev.value(e, fn)
            counts.append(_plain_count(value.value) if isinstance(value, Const) else None)
        return counts[0] if counts[0] is not None and counts[0] == counts[1] else None

    def _count_bound(self, e: ast.AST, fn: Function | None, d: int) -> Bound | None:
        n = self.count(e, fn, d)
        return Bound(n) if n is not None else None

    def sequence(self, e: ast.AST, fn: Function | None, d: int,
                 item: Reader | None = None) -> Bound | None:
        """The total bound of a list of tensors (each element read by ``item``)."""
        read = item or self.tensor
        if d > MAX_DEPTH:
            return None
        d += 1
        if isinstance(e, ast.List | ast.Tuple):
            if any(isinstance(x, ast.Starred) for x in e.elts):
                return None
            return _sum([read(x, fn, d) for x in e.elts])
        if isinstance(e, ast.ListComp | ast.GeneratorExp):
            n = self._iterations(e.generators, fn, d)
            one = read(e.elt, fn, d)
            return Bound(n * one.elements, one.dtype) if n is not None and one else None
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Mult) and _listy(e.left, e.right):
            lst, k = (e.left, e.right) if _listy(e.left) else (e.right, e.left)
            one, times = self.sequence(lst, fn, d, item), self.integer(k, fn)
            return Bound(one.elements * times, one.dtype) if one and times is not None else None
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add) and _listy(e.left, e.right):
            return _sum([self.sequence(e.left, fn, d, item), self.sequence(e.right, fn, d, item)])
        if isinstance(e, ast.Call) and last_name(e.func) in ("list", "tuple") and e.args:
            return self.sequence(e.args[0], fn, d, item)
        if isinstance(e, ast.Call) and last_name(e.func) in SPLITS and item is None:
            whole = e.func.value if isinstance(e.func, ast.Attribute) and not self._module(
                e.func.value) else (e.args[0] if e.args else None)
            return self.tensor(whole, fn, d) if whole is not None else None
        if isinstance(e, ast.Name):
            if self._mutated(e.id, fn):
                return self._appended(e.id, fn, d, lambda v, f, dd: self.sequence(
                    v, f, dd, item), read)
            mode = "sequence" if item is None else f"sequence:{id(item)}"
            return self._name(e.id, fn, d, lambda v, f, dd: self.sequence(v, f, dd, item),
                              mode)
        return None

    def _appended(self, name: str, fn: Function | None, d: int, start: Reader, item: Reader
                  ) -> Bound | None:
        """A list built in place: its assigned values (each read by ``start``) and every
        ``name.append(v)`` (``item``) times the iterations of the bounded loops around it.
        Stores into it (``counts[r] = n``) keep its length; other changes are not read."""
        scope, found = self._assignments(name, fn)
        parts: list[Bound | None] = []
        for node, target, where in found:
            value = self._assigned_value(node, target)
            if not isinstance(value, ast.AST):
                return None
            parts.append(start(value, where, d))
        if not parts:
            return None
        nodes = ast.walk(scope) if scope is not None else iter(self.py.all_nodes)
        for node in nodes:
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == name):
                continue
            where = self.py.scope_of(node)
            if node.func.attr not in ("append", "extend", "insert", "add"):
                continue  # pop, clear, remove...: no longer
            if node.func.attr in ("extend", "insert") or len(node.args) != 1:
                return None
            one = item(node.args[0], where, d)
            times = self._loop_times(node, where, d)
            parts.append(Bound(one.elements * times, one.dtype) if one and times else None)
        return _sum(parts)

    def _mutated(self, name: str, fn: Function | None) -> bool:
        scope, _ = self._assignments(name, fn)
        return (id(scope) if scope is not None else 0, name) in self.py.ev._mutated

    def _loop_times(self, node: ast.AST, fn: Function | None, d: int) -> int | None:
        """How many times the loops around ``node`` (inside its function) run it."""
        times = 1
        up = self.py.parents.get(node)
        while up is not None and not isinstance(up, ast.FunctionDef | ast.AsyncFunctionDef):
            if isinstance(up, ast.While):
                return None
            if isinstance(up, ast.For | ast.AsyncFor):
                n = self._iterations([up], fn, d)
                if n is None:
                    return None
                times *= n
            up = self.py.parents.get(up)
        return times

    def _iterations(self, loops: list[ast.comprehension] | list[ast.For | ast.AsyncFor],
                    fn: Function | None, d: int) -> int | None:
        """How many items the loops (nested) give at most."""
        total = 1
        for loop in loops:
            n = self.length(loop.iter, fn, d)
            if n is None:
                return None
            total *= n
        return total

    def length(self, e: ast.AST, fn: Function | None, d: int) -> int | None:
        """How many items iterating over ``e`` gives at most, without the inputs' sizes."""
        if d > MAX_DEPTH:
            return None
        d += 1
        if isinstance(e, ast.List | ast.Tuple | ast.Set):
            return None if any(isinstance(x, ast.Starred) for x in e.elts) else len(e.elts)
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Mult) and _listy(e.left, e.right):
            lst, k = (e.left, e.right) if _listy(e.left) else (e.right, e.left)
            n, times = self.length(lst, fn, d), self.integer(k, fn)
            return n * times if n is not None and times is not None else None
        if isinstance(e, ast.ListComp | ast.GeneratorExp):
            return self._iterations(e.generators, fn, d)
        if isinstance(e, ast.Call):
            short = last_name(e.func)
            if short == "range":
                return self._range(e, fn)
            if short in ("enumerate", "reversed", "sorted", "list", "tuple") and e.args:
                return self.length(e.args[0], fn, d)
            if short == "zip" and e.args:
                found = [n for n in (self.length(a, fn, d) for a in e.args) if n is not None]
                return min(found) if found else None
            if short == "tolist" and isinstance(e.func, ast.Attribute):
                return _elements(self.tensor(e.func.value, fn, d))  # at most its elements
            if short == "split":  # x.split([a, b, c]): one piece per size listed
                at = 0 if isinstance(e.func, ast.Attribute) and not self._module(
                    e.func.value) else 1
                pieces = e.args[at] if len(e.args) > at else None
                return self.length(pieces, fn, d) if pieces is not None and not self._scalar(
                    pieces, fn) else None
            if short in ("chunk", "tensor_split"):
                at = 0 if isinstance(e.func, ast.Attribute) and not self._module(
                    e.func.value) else 1
                sections = e.args[at] if len(e.args) > at else next(
                    (kw.value for kw in e.keywords if kw.arg in (
                        "chunks", "sections", "indices_or_sections")), None)
                return self.integer(sections, fn) if sections is not None else None
        if isinstance(e, ast.Name):
            value = self.evs[0].value(e, fn)
            other = self.evs[1].value(e, fn)
            if isinstance(value, Const) and isinstance(value.value, tuple | list | frozenset) \
                    and isinstance(other, Const) and isinstance(other.value, tuple | list
                                                                | frozenset) \
                    and len(value.value) == len(other.value):
                return len(value.value)
            if self._mutated(e.id, fn):
                return _elements(self._appended(e.id, fn, d, self._length_bound,
                                                lambda v, f, dd: Bound(1)))
            return _elements(self._name(e.id, fn, d, self._length_bound, "length"))
        return None

    def _length_bound(self, e: ast.AST, fn: Function | None, d: int) -> Bound | None:
        n = self.length(e, fn, d)
        return Bound(n) if n is not None else None

    def _range(self, e: ast.Call, fn: Function | None) -> int | None:
        ints = [self.integer(a, fn) for a in e.args]
        if not ints or None in ints:
            return None
        try:
            return len(range(*[i for i in ints if i is not None]))
        except (TypeError, ValueError):
            return None

    # --- scalars and dtypes ----------------------------------------------------------------

    def integer(self, e: ast.AST | None, fn: Function | None) -> int | None:
        """An integer the profile gives alike under both input shapes."""
        if e is None:
            return None
        values = [ev.value(e, fn) for ev in self.evs]
        plain = [v.value if isinstance(v, Const) else None for v in values]
        if not isinstance(plain[0], int) or isinstance(plain[0], bool) or plain[0] != plain[1]:
            return None
        return plain[0]

    def _scalar(self, e: ast.AST, fn: Function | None, d: int = 0) -> bool:
        """A Python number (not a tensor, not a list)."""
        if d > MAX_DEPTH:
            return False
        if isinstance(e, ast.Constant):
            return isinstance(e.value, int | float | bool)
        if isinstance(e, ast.Call):
            short = last_name(e.func)
            if isinstance(e.func, ast.Name):
                return short in SCALAR_CALLS or (short in self.py.functions and all(
                    self._scalar(r, f, d + 1) for f in self.py.callees(e, fn)
                    for r in _returns(self.py, f)) and bool(self.py.callees(e, fn)))
            receiver = e.func.value if isinstance(e.func, ast.Attribute) else None
            if receiver is not None and self._module(receiver):
                dotted = self.py.dotted(e.func) or ""
                return dotted.startswith("math.") or short in ("get_rank", "get_world_size")
            if short in ("size", "stride"):
                return bool(e.args)
            return short in METHOD_SCALARS
        if isinstance(e, ast.Subscript):
            base = e.value
            return (isinstance(base, ast.Attribute) and base.attr == "shape") or (
                isinstance(base, ast.Call) and last_name(base.func) == "size")
        if isinstance(e, ast.Attribute) and e.attr in ("ndim", "itemsize", "nbytes", "rank",
                                                       "world_size"):
            return True
        if isinstance(e, ast.UnaryOp):
            return self._scalar(e.operand, fn, d + 1)
        if isinstance(e, ast.BinOp):
            return self._scalar(e.left, fn, d + 1) and self._scalar(e.right, fn, d + 1)
        if isinstance(e, ast.BoolOp | ast.Compare):
            return all(self._scalar(v, fn, d + 1) for v in (
                e.values if isinstance(e, ast.BoolOp) else [e.left, *e.comparators]))
        if isinstance(e, ast.IfExp):
            return self._scalar(e.body, fn, d + 1) and self._scalar(e.orelse, fn, d + 1)
        value = self.py.ev.value(e, fn)
        if isinstance(value, Const) and isinstance(value.value, int | float | bool):
            return True
        if isinstance(value, Tensor):
            return False
        if isinstance(e, ast.Name):
            return self._name(e.id, fn, d + 1, self._scalar_bound, "scalar") is not None
        return False

    def _scalar_bound(self, e: ast.AST, fn: Function | None, d: int) -> Bound | None:
        return Bound(1) if self._scalar(e, fn, d) else None

    def _dtype_kw(self, kw: dict[str, ast.expr], fn: Function | None) -> str | None:
        node = kw.get("dtype")
        value = self.py.ev.value(node, fn) if node is not None else None
        return value.name if isinstance(value, DType) else None

    def _dtype(self, e: ast.AST, fn: Function | None, d: int = 0) -> str | None:
        """A tensor's dtype: the evaluator's, else through casts and dtype-keeping methods
        to a tensor whose dtype is known."""
        value = self.py.ev.value(e, fn)
        if isinstance(value, Tensor):
            return value.dtype
        if d > MAX_DEPTH:
            return None
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and not self._module(
                e.func.value):
            short = e.func.attr
            if short in CASTS and not e.args:
                return CASTS[short]
            if short in ("to", "type", "view") and e.args:
                cast = self.py.ev.value(e.args[0], fn)
                if isinstance(cast, DType):
                    return cast.name
            if short in KEEPS or short in REDUCTIONS - {"any", "all", "count_nonzero"}:
                return self._dtype(e.func.value, fn, d + 1)
        if isinstance(e, ast.BinOp):
            dtypes = {self._dtype(x, fn, d + 1) for x in (e.left, e.right)
                      if not self._scalar(x, fn)}
            return dtypes.pop() if len(dtypes) == 1 else None
        if isinstance(e, ast.Name):
            found = self._name(e.id, fn, d + 1, lambda v, f, dd: Bound(
                1, self._dtype(v, f, dd)), "dtype")
            return found.dtype if found is not None else None
        return None

    def _data_dtype(self, data: ast.AST, fn: Function | None) -> str | None:
        """torch.tensor's dtype for Python numbers: float32 if any is a float, else int64
        (bool when all are); None when a number's type is not known."""
        kinds = [self._number_kind(leaf, fn) for leaf in _leaves(data)]
        if not kinds or None in kinds:
            return None
        if "float32" in kinds:
            return "float32"
        return "bool" if set(kinds) == {"bool"} else "int64"

    def _number_kind(self, e: ast.AST, fn: Function | None) -> str | None:
        if isinstance(e, ast.Constant):
            value = e.value
        elif isinstance(e, ast.Call) and last_name(e.func) in ("float", "int", "bool"):
            return {"float": "float32", "int": "int64", "bool": "bool"}[last_name(e.func)]
        elif isinstance(e, ast.Call) and last_name(e.func) in INTEGER_SCALARS:
            return "int64"
        elif isinstance(e, ast.Subscript) and self._scalar(e, fn):
            return "int64"  # x.shape[i], x.size()[i]
        elif isinstance(e, ast.Compare):
            return "bool"
        else:
            found = self.py.ev.value(e, fn)
            if not isinstance(found, Const):
                return None
            value = found.value
        if isinstance(value, bool):
            return "bool"
        return "int64" if isinstance(value, int) else "float32" if isinstance(
            value, float) else None

    def _module(self, node: ast.AST) -> bool:
        """Is this a module (``torch``, ``torch.linalg``, ``np``), not a value?"""
        dotted = self.py.dotted(node) or ""
        root = dotted.split(".", 1)[0]
        return bool(dotted) and isinstance(node, ast.Name | ast.Attribute) and (
            (isinstance(node, ast.Name) and node.id in self.py.aliases) or root in (
                "torch", "numpy", "math", "cupy", "triton"))


_INPLACE = object()


def _sent_arg(call: ast.Call, name: str, short: str) -> ast.expr | None:
    """The tensor (or list of tensors) a collective sends."""
    keywords = {k.arg: k.value for k in call.keywords if k.arg}
    if name.startswith("torch.distributed.") and not name.startswith(
            "torch.distributed._functional_collectives") and short in SECOND_ARG:
        if len(call.args) > 1:
            return call.args[1]
        return keywords.get(SECOND_ARG[short])
    if call.args:
        return call.args[0]
    return next((keywords[k] for k in FIRST_KEYWORDS if k in keywords), None)


def _elements(found: Bound | None) -> int | None:
    return found.elements if found is not None else None


def _returns(py: PythonModel, f: Function) -> list[ast.expr]:
    return [n.value for n in ast.walk(f) if isinstance(n, ast.Return) and n.value is not None
            and py.scope_of(n) is f]


def _sum(bounds: list[Bound | None]) -> Bound | None:
    if any(b is None for b in bounds):
        return None
    found = [b for b in bounds if b is not None]
    dtypes = {b.dtype for b in found if b.elements}  # an empty start ([]) has no dtype
    return Bound(sum(b.elements for b in found), dtypes.pop() if len(dtypes) == 1 else None)


def _listy(*nodes: ast.AST) -> bool:
    return any(isinstance(n, ast.List | ast.Tuple | ast.ListComp) for n in nodes)


def _plain_count(value: object) -> int | None:
    if isinstance(value, int | float | bool):
        return 1
    if isinstance(value, tuple | list):
        parts = [_plain_count(v) for v in value]
        return None if None in parts else sum(p for p in parts if p is not None)
    return None


def _leaves(data: ast.AST) -> list[ast.AST]:
    """The numbers a Python value given to torch.tensor is built from."""
    if isinstance(data, ast.List | ast.Tuple | ast.Set):
        return [x for e in data.elts for x in _leaves(e.value if isinstance(e, ast.Starred)
                                                      else e)]
    if isinstance(data, ast.ListComp | ast.GeneratorExp | ast.SetComp):
        return _leaves(data.elt)
    if isinstance(data, ast.BinOp) and _listy(data.left, data.right):
        return [x for side in (data.left, data.right) if _listy(side) for x in _leaves(side)]
    if isinstance(data, ast.IfExp):
        return [*_leaves(data.body), *_leaves(data.orelse)]
    return [data]


def _params(fn: Function) -> set[str]:
    a = fn.args
    names = {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs]}
    return names | {x.arg for x in (a.vararg, a.kwarg) if x is not None}


def _reads(node: ast.AST, name: str) -> bool:
    value = getattr(node, "value", None)
    return value is not None and any(isinstance(n, ast.Name) and n.id == name
                                     for n in ast.walk(value))


def _reads_only_self(value: ast.AST, name: str) -> bool:
    """``x.float().contiguous()``, ``x.view(-1)``: a chain of count-keeping methods on
    ``name`` itself (so the other assignments of ``name`` decide)."""
    node = value
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
            node.func.attr in KEEPS or node.func.attr in CASTS):
        node = node.func.value
    return isinstance(node, ast.Name) and node.id == name and node is not value
