"""What commands print or write, and the checks made before any work: output paths, image
formats and ``KEY=VALUE`` options. Files are written by pkbsim.files (atomic, with the umask)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pkbsim.errors import UsageError
from pkbsim.files import is_special, write_file
from pkbsim.inputs import path_kind

IMAGE_SUFFIXES = (".png", ".svg", ".pdf")


def write_output(text: str | bytes, out: Path | None, option: str = "--out") -> None:
    """Print ``text`` (``out`` None or ``-``), or write it to ``out`` (pkbsim.files.write_file:
    a file atomically, so a failure never leaves it half-written; a device or FIFO through)."""
    if out is None or str(out) == "-":
        if isinstance(text, str):
            sys.stdout.write(text)
        else:
            sys.stdout.flush()
            sys.stdout.buffer.write(text)
        return
    check_writable(out, option)
    try:
        write_file(out.expanduser(), text)
    except OSError as exc:
        raise UsageError(f"{option} {out}: cannot write ({exc.strerror or exc})") from None


def check_writable(out: Path, option: str, *, regular: bool = False) -> None:
    """Fail before any work when ``out`` cannot be written; ``regular``: it must be a regular
    file or a new path (a file pkbsim reads back, such as a sweep's JSON lines)."""
    if str(out) == "-":
        if regular:
            raise UsageError(f"{option} -: expected a file (it is read back)")
        return
    out = out.expanduser()
    kind = path_kind(out, name=f"{option} {out}")
    if kind == "folder":
        raise UsageError(f"{option} {out}: is a folder")
    if kind == "other" or is_special(out):
        if regular:
            raise UsageError(f"{option} {out}: not a regular file (it is read back, so a "
                             "device, FIFO or - cannot hold it)")
        return
    target = Path(os.path.realpath(out))
    parent = path_kind(target.parent, name=f"{option} {out}")
    if parent != "folder":
        raise UsageError(f"{option} {out}: folder {target.parent} "
                         + ("does not exist" if parent == "missing" else "is not a folder"))


def image_format(path: Path, option: str, suffixes: tuple[str, ...] = IMAGE_SUFFIXES) -> str:
    """The image format a path's suffix names (png, svg, pdf; PNG for ``-``, standard output),
    or a usage error."""
    if str(path) == "-":
        return suffixes[0][1:]
    suffix = path.suffix.lower()
    if suffix not in suffixes:
        names = (", ".join(suffixes[:-1]) + " or " + suffixes[-1]) if len(suffixes) > 1 \
            else suffixes[0]
        raise UsageError(f"{option} {path}: expected a file ending in {names}")
    return suffix[1:]


def parse_sets(items: list[str], option: str = "--set") -> dict[str, str]:
    """``KEY=VALUE`` items as a mapping (the last of a repeated key wins)."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise UsageError(f"{option} {item!r}: expected KEY=VALUE")
        out[key.strip()] = value.strip()
    return out
