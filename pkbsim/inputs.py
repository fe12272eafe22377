"""Reading what users hand pkbsim: data files, results, logs, CSVs, solution files.

Only regular files are read (a FIFO would block forever, a device never end), each up to a size
limit checked before reading; JSON is parsed without NaN or infinities and to a bounded depth.
Every failure is one PkbsimError naming the file.
"""

from __future__ import annotations

import codecs
import errno
import io
import json
import math
import os
import stat
import tokenize
from pathlib import Path
from typing import Any

from pkbsim.bounds import MAX_NUMBER_CHARS
from pkbsim.errors import PkbsimError, UsageError
from pkbsim.limits import INPUT_BYTES, NESTING, Limit


def path_kind(path: str | Path, *, error: type[PkbsimError] = UsageError,
              name: str | None = None) -> str:
    """What ``path`` names, following symbolic links: ``missing``, ``file`` (regular),
    ``folder`` or ``other`` (a FIFO, device or socket). A path the system cannot look up (a
    name too long, a loop of symbolic links, a folder it may not enter) is ``error`` naming it
    (``name``, else the path), where ``Path.exists`` would raise or say False."""
    try:
        info = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return "missing"
    except OSError as exc:
        raise error(f"cannot use this path: {lookup_error(exc)}",
                    file=name or str(path)) from None
    if stat.S_ISREG(info.st_mode):
        return "file"
    return "folder" if stat.S_ISDIR(info.st_mode) else "other"


def lookup_error(exc: OSError) -> str:
    """An ``OSError`` from looking a path up, in words."""
    if exc.errno == errno.ELOOP:
        return "too many levels of symbolic links (a loop of links?)"
    return (exc.strerror or str(exc)).lower()


def read_bytes(path: str | Path, *, limit: Limit = INPUT_BYTES,
               error: type[PkbsimError] = UsageError) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes."""
    name = str(path)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise error("no such file", file=name) from None
    except OSError as exc:
        raise error(f"cannot read file: {exc.strerror}", file=name) from None
    if stat.S_ISDIR(info.st_mode):
        raise error("is a folder, not a file", file=name)
    if not stat.S_ISREG(info.st_mode):
        raise error("not a regular file (FIFOs, devices and sockets are not read)", file=name)
    limit.check(info.st_size, "file size", error, name)
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit.value + 1)
    except OSError as exc:
        raise error(f"cannot read file: {exc.strerror}", file=name) from None
    limit.check(len(data), "file size", error, name)  # it grew while we looked
    return data


def read_text(path: str | Path, *, limit: Limit = INPUT_BYTES,
              error: type[PkbsimError] = UsageError, strict: bool = False) -> str:
    """A regular file as UTF-8 text (undecodable bytes replaced unless ``strict``)."""
    data = read_bytes(path, limit=limit, error=error)
    try:
        return data.decode("utf-8", errors="strict" if strict else "replace")
    except UnicodeDecodeError as exc:
        raise error(f"cannot read: not UTF-8 text (byte {exc.start})", file=str(path)) from None


def read_source(path: str | Path, *, limit: Limit = INPUT_BYTES,
                error: type[PkbsimError] = UsageError) -> str:
    """A Python source file as text, decoded as Python decodes it (PEP 263): a UTF-8 byte
    order mark or a coding line (``# -*- coding: latin-1 -*-``), else UTF-8."""
    data = read_bytes(path, limit=limit, error=error)
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:  # an unknown codec, a BOM with another coding line
        why = exc.msg
        if data.startswith(codecs.BOM_UTF8) and why.startswith("encoding problem"):
            why = "a UTF-8 byte order mark, but a coding line naming another encoding"
        elif why.startswith("invalid or missing encoding"):  # not UTF-8 in its first lines
            why = NOT_UTF8
        raise error(f"cannot read Python source: {why}", file=str(path)) from None
    try:
        return data.decode(encoding)  # utf-8-sig drops the byte order mark
    except UnicodeDecodeError as exc:
        why = NOT_UTF8 if encoding.startswith("utf-8") else f"not {encoding} text"
        raise error(f"cannot read Python source: {why} (byte {exc.start})",
                    file=str(path)) from None


NOT_UTF8 = "not UTF-8, and no coding line names its encoding (PEP 263)"


def loads_json(text: str | bytes, *, file: str | None = None, field: str | None = None,
               error: type[PkbsimError] = UsageError) -> Any:
    """Parse JSON: NaN, infinities and numbers that overflow refused, integers of at most
    MAX_NUMBER_CHARS digits, nesting at most NESTING deep."""
    def no_constant(name: str) -> Any:
        raise ValueError(f"{name} is not a number pkbsim accepts")

    def finite(text: str) -> float:
        value = float(text)
        if not math.isfinite(value):
            raise ValueError(f"{text[:40]} is not a finite number")
        return value

    def integer(text: str) -> int:
        if len(text) > MAX_NUMBER_CHARS:
            raise ValueError(f"an integer of {len(text)} digits")
        return int(text)

    try:
        value = json.loads(text, parse_constant=no_constant, parse_float=finite,
                           parse_int=integer)
    except RecursionError:
        raise error(f"not JSON pkbsim reads: nested deeper than {NESTING.value} levels",
                    file=file, field=field) from None
    except (ValueError, OverflowError) as exc:  # JSONDecodeError, NaN, a 5,000-digit integer
        raise error(f"not JSON ({' '.join(str(exc).split())[:200]})", file=file,
                    field=field) from None
    check_nesting(value, file=file, error=error)
    return value


def check_nesting(value: Any, *, file: str | None = None,
                  error: type[PkbsimError] = UsageError) -> None:
    """Lists and mappings nested at most NESTING deep (checked without recursion)."""
    limit = NESTING.value
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            raise NESTING.exceeded(depth, "nesting", error, file)
        stack.extend((child, depth + 1) for child in children)
