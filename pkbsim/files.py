"""The one place pkbsim writes files: whole files atomically, streams line by line.

A whole file (``--out``, ``--plot``, results.json, a finished sweep) named by a new path is
written to a temporary file beside it and renamed there, so a failure never leaves a half-written
file. An existing file keeps what makes it the user's: its mode, owner, group and hard links. It
is replaced the same way (the new file given its mode, owner and group) when it has one link and
its owner and group can be given; otherwise (a hard-linked file, a file of another owner) it is
rewritten in place, with the new size reserved first, so a full disk fails before the old
content is touched. A file pkbsim may not write (``>`` would be refused) is refused, even where
its folder would let it be replaced. A symbolic link is followed and its target written so. A
stream (a sweep's JSON lines, a child process's log) is appended to as results appear. A new
file gets the mode a plain ``open`` would give it (0666 less the umask). Errors are
``OSError``; callers name the option or file.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import IO, Any

from pkbsim.errors import InfeasibleError


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write ``data`` (text is UTF-8) to the regular file or new path ``path`` names (through
    symbolic links): a new file in one rename; an existing one with its mode, owner, group and
    hard links kept (see the module's text)."""
    blob = data.encode() if isinstance(data, str) else data
    target = Path(os.path.realpath(path))
    try:
        old: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        old = None
    if old is not None:
        if not os.access(target, os.W_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        if old.st_nlink > 1:  # a rename would split the links: every name must see the new data
            _write_in_place(target, blob)
            return
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except PermissionError:
        if old is None:
            raise
        _write_in_place(target, blob)  # a writable file in a folder we may not add to
        return
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(blob)
        if old is not None and not _give_metadata(tmp, old):
            Path(tmp).unlink()
            _write_in_place(target, blob)
            return
        if old is None:
            os.chmod(tmp, 0o666 & ~umask())  # mkstemp makes 0600; a written file is the user's
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _give_metadata(tmp: str, old: os.stat_result) -> bool:
    """Give ``tmp`` the owner, group and mode of ``old``; False where the owner or group
    cannot be given (the file belongs to another user, or to a group we are not in)."""
    mine = os.stat(tmp)
    if (mine.st_uid, mine.st_gid) != (old.st_uid, old.st_gid):
        try:
            os.chown(tmp, old.st_uid, old.st_gid)
        except PermissionError:
            return False
    os.chmod(tmp, stat.S_IMODE(old.st_mode))  # after chown, which clears set-id bits
    return True


def _write_in_place(target: Path, blob: bytes) -> None:
    """Rewrite ``target`` through its own inode: its links, owner, group and mode stay. The
    new size is reserved first, so a full disk fails before anything is overwritten."""
    fd = os.open(target, os.O_WRONLY)
    try:
        if blob:
            try:
                os.posix_fallocate(fd, 0, len(blob))
            except OSError as exc:
                if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                    raise
        view = memoryview(blob)
        while view:
            view = view[os.write(fd, view):]
        os.ftruncate(fd, len(blob))
    finally:
        os.close(fd)


def write_file(path: Path, data: str | bytes) -> None:
    """Write ``data`` to what ``path`` names, without ever changing what kind of file it is.

    A new path or a regular file is written by :func:`write_atomic` (a symbolic link is
    followed and its target written so: the link stays a link); a device, a FIFO or anything
    under /dev or /proc (``/dev/stdout``, ``/dev/full``) is written through, as ``>`` would."""
    if is_special(path):
        blob = data.encode() if isinstance(data, str) else data
        with open(path, "wb") as handle:
            handle.write(blob)
        return
    write_atomic(path, data)


def is_special(path: Path) -> bool:
    """Is ``path`` (or what it links to) something other than a regular file or a new path:
    a device, FIFO or socket, or a name under /dev or /proc? A path that cannot be looked up
    (too long, a loop of symbolic links) is an ``OSError``."""
    try:
        info: os.stat_result | None = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
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
