"""Typed errors for bad input. The CLI turns each into one line on stderr and exit code 2."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class PkbsimError(Exception):
    """A user-facing error: which file, which field, what was expected."""

    def __init__(self, message: str, *, file: str | None = None, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.file = file
        self.field = field

    def one_line(self) -> str:
        """FILE: FIELD: MESSAGE on one line; a word over LONG_WORD characters (a value someone
        typed, 5,000 digits long) is shortened in the middle."""
        where = ": ".join(part for part in (self.file, self.field) if part)
        text = f"{where}: {self.message}" if where else self.message
        return " ".join(shorten(word) for word in text.split())


LONG_WORD = 200


def shorten(word: str) -> str:
    if len(word) <= LONG_WORD:
        return word
    return f"{word[:60]}...{word[-20:]} ({len(word):,} characters)"


def close_names(name: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    """The candidates closest to a mistyped ``name``, closest first (the same name in another
    case before all)."""
    known = [str(c) for c in candidates]
    folded = [c for c in known if c.lower() == name.lower() and c != name]
    close = folded + [c for c in difflib.get_close_matches(name, known, n=n, cutoff=0.6)
                      if c not in folded]
    return close[:n]


def did_you_mean(name: str, candidates: Iterable[str], n: int = 3) -> str:
    """``"; did you mean 'x'?"`` naming :func:`close_names`, or "" when none is close."""
    close = close_names(name, candidates, n)
    return "; did you mean " + " or ".join(repr(c) for c in close) + "?" if close else ""


class TopologyError(PkbsimError):
    """A topology file is missing, malformed or inconsistent."""


class TaskError(PkbsimError):
    """A task file is missing, malformed or inconsistent."""


class ExpressionError(PkbsimError):
    """An arithmetic expression in a data file cannot be parsed or evaluated."""


class InfeasibleError(PkbsimError):
    """The request cannot be met: a world size the task or topology cannot take."""


class UsageError(PkbsimError):
    """A command-line value is wrong: unknown name, unknown --set key, bad number."""


class NotApplicableError(UsageError):
    """The request does not apply to this task: a preset the task does not define (``--preset
    production`` on a task without a production size). A sweep counts such a point as not
    applicable, apart from its failures; one command still ends with exit code 2."""


class ArgumentError(UsageError, TypeError):
    """A Python API argument of the wrong type (``pkbsim.analyze(1.5)``): the argument's name,
    what it takes and what it got. A TypeError too, as Python's own would be."""
