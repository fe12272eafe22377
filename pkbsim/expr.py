"""Safe arithmetic expressions for data files.

Task files describe sizes as expressions over parameters, e.g. ``batch * seq * (vocab // W) * 2``.
They are parsed with :mod:`ast` and only a small whitelist is evaluated: numbers, names,
arithmetic, comparisons, boolean logic, ``a if c else b`` and the functions in ``FUNCTIONS``.
Nothing is ever passed to ``eval``. An expression is at most MAX_CHARS characters and nests at
most MAX_DEPTH sub-expressions deep, both checked before anything recurses over it, so a
50,000-term sum or 5,000 chained conditionals are one error, not a RecursionError.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

from pkbsim.errors import ExpressionError

Number = int | float


def _round_up(x: Number, multiple: Number) -> Number:
    return ((x + multiple - 1) // multiple) * multiple


def _cdiv(a: Number, b: Number) -> Number:
    return -(-a // b)


def _is_pow2(x: Number) -> bool:
    return isinstance(x, int) and x > 0 and (x & (x - 1)) == 0


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "min": min,
    "max": max,
    "abs": abs,
    "int": int,
    "float": float,
    "ceil": math.ceil,
    "floor": math.floor,
    "sqrt": math.sqrt,
    "log2": math.log2,
    "round_up": _round_up,
    "cdiv": _cdiv,
    "is_pow2": _is_pow2,
}

_BINOPS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Not: operator.not_,
}
_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}


MAX_CHARS = 2000  # 3x the longest shipped expression (627 characters)
MAX_DEPTH = 100  # nested sub-expressions; the deepest shipped nests 22


def quoted(text: str) -> str:
    """An expression for a message: quoted, and shortened when long."""
    if len(text) <= 80:
        return repr(text)
    return f"{text[:60]!r}... ({len(text):,} characters)"


@lru_cache(maxsize=4096)
def parse(text: str) -> ast.expr:
    """Parse ``text`` into a checked expression tree (cached)."""
    text = text.strip()
    if len(text) > MAX_CHARS:
        raise ExpressionError(f"expression {quoted(text)} is longer than {MAX_CHARS:,} "
                              "characters")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise ExpressionError(f"cannot parse expression {quoted(text)}: {exc.msg}") from None
    except (RecursionError, MemoryError):  # the parser's own stack, deep inside MAX_CHARS
        raise ExpressionError(f"expression {quoted(text)} nests deeper than {MAX_DEPTH} "
                              "levels") from None
    if depth(tree.body) > MAX_DEPTH:
        raise ExpressionError(f"expression {quoted(text)} nests deeper than {MAX_DEPTH} levels")
    _check(tree.body, text)
    return tree.body


def depth(node: ast.expr) -> int:
    """How many sub-expressions deep ``node`` nests (counted without recursion; stops past
    MAX_DEPTH)."""
    deepest, stack = 0, [(node, 1)]
    while stack and deepest <= MAX_DEPTH:
        current, level = stack.pop()
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in ast.iter_child_nodes(current)
                     if isinstance(child, ast.expr))
    return deepest


def _check(node: ast.AST, text: str) -> None:
    allowed = (
        ast.Constant, ast.Name, ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp,
        ast.IfExp, ast.Call, ast.Load, ast.operator, ast.unaryop, ast.cmpop, ast.boolop,
    )
    for child in ast.walk(node):
        if not isinstance(child, allowed):
            raise ExpressionError(
                f"expression {quoted(text)} uses {type(child).__name__}, which is not allowed"
            )
        if isinstance(child, ast.Constant) and not isinstance(child.value, (int, float, bool)):
            raise ExpressionError(f"expression {quoted(text)} has a non-numeric constant")
        if isinstance(child, ast.BinOp) and type(child.op) not in _BINOPS:
            raise ExpressionError(f"expression {quoted(text)} uses an operator that is not "
                                  "allowed")
        if isinstance(child, ast.Call):
            if not isinstance(child.func, ast.Name) or child.func.id not in FUNCTIONS:
                raise ExpressionError(
                    f"expression {quoted(text)} calls an unknown function; allowed: "
                    + ", ".join(sorted(FUNCTIONS))
                )
            if child.keywords:
                raise ExpressionError(f"expression {quoted(text)} uses keyword arguments")


def names(text: str) -> set[str]:
    """The free variable names ``text`` refers to (function names excluded)."""
    tree = parse(text)
    called = {c.func.id for c in ast.walk(tree) if isinstance(c, ast.Call)
              and isinstance(c.func, ast.Name)}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - called


def evaluate(value: str | Number | bool, env: Mapping[str, Number]) -> Number:
    """Evaluate an expression (or pass a number through) with variables from ``env``."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)):
        return value
    tree = parse(str(value))
    try:
        result = _eval(tree, env, str(value))
    except ZeroDivisionError:
        raise ExpressionError(f"expression {quoted(str(value))} divides by zero") from None
    except (OverflowError, ValueError, TypeError) as exc:
        raise ExpressionError(f"expression {quoted(str(value))} cannot be evaluated: "
                              f"{exc}") from None
    if isinstance(result, bool):
        return int(result)
    if not isinstance(result, (int, float)):
        raise ExpressionError(f"expression {quoted(str(value))} did not give a number")
    if isinstance(result, float) and not math.isfinite(result):
        raise ExpressionError(f"expression {quoted(str(value))} is not a finite number "
                              f"({result})")
    return result


MAX_INT_BITS = 4096  # integers past this are no size pkbsim can use


def _too_big(left: Any, right: Any, op: ast.operator) -> bool:
    """Would an integer result pass MAX_INT_BITS (checked before computing it)?"""
    if not (isinstance(left, int) and isinstance(right, int)):
        return False
    if isinstance(op, ast.Pow):
        return right > 0 and left.bit_length() * right > MAX_INT_BITS
    if isinstance(op, ast.LShift):
        return left.bit_length() + right > MAX_INT_BITS
    return left.bit_length() + right.bit_length() > MAX_INT_BITS + 1


def _eval(node: ast.expr, env: Mapping[str, Number], text: str) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in env:
            raise ExpressionError(
                f"expression {quoted(text)} refers to unknown name {node.id!r}; known: "
                + ", ".join(sorted(env))
            )
        return env[node.id]
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left, env, text), _eval(node.right, env, text)
        if isinstance(node.op, ast.Pow) and abs(right) > 64:
            raise ExpressionError(f"expression {quoted(text)} has an exponent above 64")
        if isinstance(node.op, (ast.Pow, ast.Mult, ast.LShift)) and _too_big(left, right, node.op):
            raise ExpressionError(f"expression {quoted(text)} grows beyond {MAX_INT_BITS} bits")
        return _BINOPS[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp):
        return _UNARY[type(node.op)](_eval(node.operand, env, text))
    if isinstance(node, ast.BoolOp):
        values = [_eval(v, env, text) for v in node.values]
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.Compare):
        left = _eval(node.left, env, text)
        for op, comp in zip(node.ops, node.comparators, strict=True):
            right = _eval(comp, env, text)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.IfExp):
        cond = _eval(node.test, env, text)
        return _eval(node.body if cond else node.orelse, env, text)
    if isinstance(node, ast.Call):
        assert isinstance(node.func, ast.Name)
        args = [_eval(a, env, text) for a in node.args]
        return FUNCTIONS[node.func.id](*args)
    raise ExpressionError(f"expression {quoted(text)} cannot be evaluated")
