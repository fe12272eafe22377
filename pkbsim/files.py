"""The one place pkbsim writes files: whole files atomically, streams line by line.

A whole file (``--out``, ``--plot``, results.json, a finished sweep) is written to a temporary
file beside it and renamed over it, so a failure never leaves a half-written file and an
existing one stays until the new one is complete. A stream (a sweep's JSON lines, a child
process's log) is appended to as results appear. Every file gets the mode a plain ``open``
would give it (0666 less the umask). Errors are ``OSError``; callers name the option or file.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path
from typing import IO, Any

from pkbsim.errors import InfeasibleError


def write_atomic(path: Path, data: str | bytes) -> None:
    """Replace ``path`` with ``data`` (text is UTF-8) in one rename."""
    blob = data.encode() if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(blob)
        os.chmod(tmp, 0o666 & ~umask())  # mkstemp makes 0600; a written file is the user's
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_file(path: Path, data: str | bytes) -> None:
    """Write ``data`` to what ``path`` names, without ever changing what kind of file it is.

    A new path or a regular file is replaced atomically (:func:`write_atomic`); a symbolic link
    is followed and its target written so (the link stays a link); a device, a FIFO or anything
    under /dev or /proc (``/dev/stdout``, ``/dev/full``) is written through, as ``>`` would."""
    if is_special(path):
        blob = data.encode() if isinstance(data, str) else data
        with open(path, "wb") as handle:
            handle.write(blob)
        return
    write_atomic(Path(os.path.realpath(path)), data)


def is_special(path: Path) -> bool:
    """Is ``path`` (or what it links to) something other than a regular file or a new path:
    a device, FIFO or socket, or a name under /dev or /proc?"""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        info = None
    if info is not None and not stat.S_ISREG(info.st_mode):
        return True
    names = (str(Path(path).absolute()), os.path.realpath(path))
    return any(n == p or n.startswith(p + "/") for n in names for p in ("/dev", "/proc"))


def open_stream(path: Path, keep_bytes: int = 0) -> IO[bytes]:
    """``path`` open for appending lines. ``keep_bytes`` 0: a new, empty file (an old one is
    truncated); otherwise the first ``keep_bytes`` are kept (a line cut off by a kill after
    them is dropped) and a missing final newline is added."""
    if keep_bytes <= 0:
        return path.open("wb")
    handle = path.open("r+b")
    handle.truncate(keep_bytes)
    handle.seek(keep_bytes - 1)
    if handle.read(1) != b"\n":
        handle.write(b"\n")
    handle.seek(0, os.SEEK_END)
    return handle


def umask() -> int:
    """The process's umask (read without changing it for longer than one call)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def json_text(obj: Any, **options: Any) -> str:
    """``obj`` as JSON that any parser reads: a NaN or an infinity (which ``json.dumps`` would
    write as the non-JSON ``NaN``) is an InfeasibleError instead."""
    try:
        return json.dumps(obj, allow_nan=False, **options)
    except ValueError:
        raise InfeasibleError("a computed value is not a finite number; no JSON written (a "
                              "number in the inputs is out of the range pkbsim models)") from None
