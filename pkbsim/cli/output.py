"""What commands print or write, and the checks made before any work: output paths, image
formats and ``KEY=VALUE`` options. Files are written by pkbsim.files (atomic, with the umask)."""

from __future__ import annotations

import sys
from pathlib import Path

from pkbsim.errors import UsageError
from pkbsim.files import write_atomic

IMAGE_SUFFIXES = (".png", ".svg", ".pdf")


def write_output(text: str | bytes, out: Path | None, option: str = "--out") -> None:
    """Print ``text``, or write it to ``out`` atomically (a failure never leaves a half-written
    file)."""
    if out is None:
        assert isinstance(text, str)
        sys.stdout.write(text)
        return
    check_writable(out, option)
    try:
        write_atomic(out.expanduser(), text)
    except OSError as exc:
        raise UsageError(f"{option} {out}: cannot write ({exc.strerror})") from None


def check_writable(out: Path, option: str) -> None:
    """Fail before any work when ``out`` cannot be written."""
    out = out.expanduser()
    if out.parent and not out.parent.exists():
        raise UsageError(f"{option} {out}: folder {out.parent} does not exist")
    if out.is_dir():
        raise UsageError(f"{option} {out}: is a folder")


def image_format(path: Path, option: str, suffixes: tuple[str, ...] = IMAGE_SUFFIXES) -> str:
    """The image format a path's suffix names (png, svg, pdf), or a usage error."""
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
