from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pkbsim.errors import ExpressionError
from pkbsim.expr import evaluate, names


@pytest.mark.parametrize(
    ("text", "env", "expected"),
    [
        ("W * 2", {"W": 8}, 16),
        ("round_up(max(W, min(M // 128, 32)), W)", {"W": 8, "M": 1024}, 8),
        ("round_up(max(W, min(M // 128, 32)), W)", {"W": 3, "M": 1024}, 9),
        ("cdiv(10, 4)", {}, 3),
        ("log2(256) + 15", {}, 23.0),
        ("8 % W == 0", {"W": 4}, 1),
        ("8 % W == 0", {"W": 3}, 0),
        ("1 if W > 4 else 2", {"W": 8}, 1),
        ("W >= 2 and W <= 8", {"W": 16}, 0),
        ("2 ** 10", {}, 1024),
        ("-x + abs(-3)", {"x": 1}, 2),
    ],
)
def test_evaluates(text: str, env: dict, expected: float) -> None:
    assert evaluate(text, env) == expected


def test_numbers_pass_through() -> None:
    assert evaluate(7, {}) == 7
    assert evaluate(0.5, {}) == 0.5


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("__import__('os')", "non-numeric constant|unknown function"),
        ("x.real", "Attribute"),
        ("(lambda: 1)()", "Lambda|unknown function"),
        ("[1, 2][0]", "List|Subscript"),
        ("open('f')", "non-numeric constant|unknown function"),
        ("W @ W", "operator"),
        ("W +", "cannot parse"),
        ("2 ** 100", "exponent"),
        ("1 / 0", "divides by zero"),
        ("foo + 1", "unknown name 'foo'"),
        ("max(x=1)", "keyword"),
    ],
)
def test_rejects(text: str, message: str) -> None:
    with pytest.raises(ExpressionError, match=message):
        evaluate(text, {"W": 8})


def test_names_excludes_functions() -> None:
    assert names("max(W, M // 128) + cdiv(a, 2)") == {"W", "M", "a"}


@given(st.integers(-10**6, 10**6), st.integers(1, 10**6), st.integers(-50, 50))
def test_matches_python_integer_arithmetic(a: int, b: int, c: int) -> None:
    env = {"a": a, "b": b, "c": c}
    assert evaluate("a // b + a % b * c - (a - c) * 3", env) == a // b + a % b * c - (a - c) * 3
