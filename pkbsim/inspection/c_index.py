"""Lookups in the text of device source, each table built once, so that reading a file costs
time in proportion to its size: a regex whose ``[^;]*`` runs to the next delimiter, retried at
each of n tokens, or a search from each token to the end, costs the square of n (4,000
``__global__`` tokens took 14 s). Each function here gives what such a regex gave, from
positions found in one pass and looked up by bisection."""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator

from pkbsim.inspection.patterns import C_NOT_FUNCTIONS

_CLOSERS = {"(": ")", "{": "}", "[": "]", "<": ">"}
NAME_CALL = re.compile(r"\b(\w+)\s*\(")
_FUNCTION_TAIL = re.compile(r"\)\s*(?:const\s*)?(?:noexcept\s*)?")
_TK_TAIL = re.compile(r"\b(\w+)\s*\(\s*const\s+(?:\w+::)*globals\s*&")
_DEFINE = re.compile(r"#define\s+(\w+)\s+(?=\S)")
_ASSIGNED = re.compile(r"\b(\w+)\s*(?:\{|=(?!=))")


class TextIndex:
    """One text and the positions of what is looked up in it."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._starts: dict[str, list[int]] = {}
        self._pairs: dict[str, dict[int, int]] = {}

    def starts(self, pattern: str) -> list[int]:
        """Every position where ``pattern`` matches (overlapping ones too), sorted."""
        if pattern not in self._starts:
            self._starts[pattern] = [m.start() for m in re.finditer(f"(?={pattern})",
                                                                    self.text)]
        return self._starts[pattern]

    def next(self, pattern: str, pos: int) -> int:
        """The first position at or after ``pos`` where ``pattern`` matches; -1 if none."""
        starts = self.starts(pattern)
        k = bisect.bisect_left(starts, pos)
        return starts[k] if k < len(starts) else -1

    def count(self, pattern: str, pos: int) -> int:
        """How many matches of ``pattern`` start before ``pos``."""
        return bisect.bisect_left(self.starts(pattern), pos)

    def close(self, at: int) -> int:
        """Index of the bracket closing the one at ``at``, counting only brackets of its type
        (the end of the text if it is never closed)."""
        opener = self.text[at]
        if opener not in self._pairs:
            self._pairs[opener] = bracket_pairs(self.text, opener)
        return self._pairs[opener].get(at, len(self.text) - 1)


def bracket_pairs(text: str, opener: str) -> dict[int, int]:
    """Each ``opener`` in ``text`` and the index of the bracket of its type closing it (other
    bracket types are not counted); an opener never closed is left out."""
    closer = _CLOSERS[opener]
    pairs: dict[int, int] = {}
    stack: list[int] = []
    for m in re.finditer(re.escape(opener) + "|" + re.escape(closer), text):
        if m.group() == opener:
            stack.append(m.start())
        elif stack:
            pairs[stack.pop()] = m.start()
    return pairs


def functions(shape: TextIndex) -> Iterator[tuple[str, int]]:
    r"""C++ function definitions, ``name(...) [const] [noexcept] {``, as (name, index of the
    "{"): ``\b(\w+)\s*\([^;{}]*\)\s*(?:const\s*)?(?:noexcept\s*)?\{`` with
    ``finditer``. The "{" can only be the first of ";{}" after the "(", and the ")" the last
    before it."""
    for name, _paren, brace in function_heads(shape):
        yield name, brace


def function_heads(shape: TextIndex) -> Iterator[tuple[str, int, int]]:
    """C++ function definitions as (name, index of the "(" opening the parameters, index of
    the "{" opening the body), as :func:`functions` finds them."""
    text, resume = shape.text, 0
    tails: dict[int, int] = {}  # "{" -> the ")" before it, if only a tail lies between, or -1
    for m in NAME_CALL.finditer(text):
        if m.start() < resume:
            continue
        brace = shape.next(r"[;{}]", m.end())
        if brace < 0 or text[brace] != "{":
            continue
        if brace not in tails:
            parens = shape.starts(r"\)")
            k = bisect.bisect_left(parens, brace) - 1
            tails[brace] = parens[k] if k >= 0 and _FUNCTION_TAIL.fullmatch(
                text, parens[k], brace) else -1
        if tails[brace] < m.end():
            continue
        resume = brace + 1
        if m.group(1) not in C_NOT_FUNCTIONS:
            yield m.group(1), m.end() - 1, brace


def function_map(shape: TextIndex) -> tuple[list[int], list[str]]:
    """Where the innermost enclosing function changes, as sorted starts and names: a function
    holds the positions after its "{" up to its "}". Braces of one type nest, so one sweep
    over the openings and closings gives the innermost."""
    events: list[tuple[int, int, str]] = []  # (first position, 0 close / 1 open, name)
    for name, brace in functions(shape):
        events.append((brace + 1, 1, name))
        events.append((shape.close(brace) + 1, 0, ""))
    events.sort(key=lambda e: (e[0], e[1]))
    starts: list[int] = []
    names: list[str] = []
    stack: list[str] = []
    for pos, opens, name in events:
        if opens:
            stack.append(name)
        else:
            stack.pop()
        top = stack[-1] if stack else ""
        if starts and starts[-1] == pos:
            names[-1] = top
        else:
            starts.append(pos)
            names.append(top)
    return starts, names


def tk_heads(shape: TextIndex) -> list[int]:
    r"""ThunderKittens kernels, ``__device__ ... name(const globals &``: the start of each name,
    as ``__device__[^;{}]*?\b(\w+)\s*\(\s*const\s+(?:\w+::)*globals\s*&`` finds it: the
    first such name after ``__device__`` and before the next of ";{}"."""
    tails = list(_TK_TAIL.finditer(shape.text))
    tail_starts = [m.start() for m in tails]
    heads, resume = [], 0
    for at in shape.starts("__device__"):
        if at < resume:
            continue
        after = at + len("__device__")
        k = bisect.bisect_left(tail_starts, after)
        stop = shape.next(r"[;{}]", after)
        if k < len(tails) and (stop < 0 or tail_starts[k] < stop):
            heads.append(tails[k].start(1))
            resume = tails[k].end()
    return heads


def launches(code: TextIndex) -> list[tuple[int, str]]:
    """Kernel launches ``<<<...>>>`` as (position, configuration): ``<<<([^;]*?)>>>`` with
    ``finditer``, the configuration running to the first ">>>" with no ";" before it."""
    found: list[tuple[int, str]] = []
    resume = 0
    for at in code.starts("<<<"):
        if at < resume:
            continue
        end = code.next(">>>", at + 3)
        stop = code.next(";", at + 3)
        if end < 0 or 0 <= stop < end:
            continue
        found.append((at, code.text[at + 3:end]))
        resume = end + 3
    return found


def definitions(code: TextIndex) -> dict[str, list[str]]:
    r"""Each name's values, as ``re.findall`` with ``#define\s+NAME\s+(\S+)|\bNAME\s*(?:\{|
    =(?!=))\s*([^;}]+)`` gives them, for every name at once (a value runs to the next ";" or
    "}"; a match hides the same name's matches inside it)."""
    found: list[tuple[int, int, str, str]] = []  # (start, end, name, value)
    for at in code.starts("#define"):
        m = _DEFINE.match(code.text, at)
        if m is not None:
            end = code.next(r"\s", m.end())
            end = len(code.text) if end < 0 else end
            found.append((at, end, m.group(1), code.text[m.end():end]))
    for m in _ASSIGNED.finditer(code.text):
        stop = code.next(r"[;}]", m.end())
        stop = len(code.text) if stop < 0 else stop
        if stop > m.end():  # [^;}]+ takes one character at least
            found.append((m.start(), stop, m.group(1), code.text[m.end():stop]))
    found.sort()
    values: dict[str, list[str]] = {}
    resume: dict[str, int] = {}
    for start, end, name, value in found:
        if start >= resume.get(name, 0):
            values.setdefault(name, []).append(value)
            resume[name] = end
    return values
