"""Static inspection of a PKB solution file: what moves the data, what waits, what runs per call.

Pure: source text and a file name in, an ``Inspection`` out. Python is read through ``ast``, so
comments and docstrings never count. CUDA and PTX are read from string literals that are device
source (they hold ``__global__``, ``asm(``, ``#include``..., or are passed to load_inline,
cupy.RawKernel, tl.inline_asm_elementwise...), after blanking ``//`` and ``/* */`` comments and
the C string literals outside ``asm(...)``. *Per call* means reached from ``solution()`` on every
call: what sits behind a cache check (``if _ext is None:``, ``if key not in _cache:``, after an
early ``return`` of a cached value, in an ``@functools.cache`` function) runs once. Every
mechanism and every True flag carries (line, snippet) evidence.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pkbsim.errors import PkbsimError
from pkbsim.inputs import path_kind, read_source
from pkbsim.inspection.call_sites import CallSite, call_sites
from pkbsim.inspection.device_source import (
    c_kernel_flags,
    c_kernels,
    c_patterns,
    count_kernels,
    device_sources,
)
from pkbsim.inspection.evidence import SNIPPET_CHARS, EvidenceLog
from pkbsim.inspection.patterns import SM_PEER_PTRS
from pkbsim.inspection.profile import PKB_PROFILE, Profile
from pkbsim.inspection.python_calls import python_calls, python_peers, triton_kernels
from pkbsim.inspection.python_model import PythonModel
from pkbsim.inspection.vocab import FLAGS, MECHANISMS
from pkbsim.limits import SOURCE_BYTES, SOURCE_FILES, SOURCE_TOTAL_BYTES, WALK_ENTRIES

Evidence = Mapping[str, tuple[tuple[int, str], ...]]


class InspectError(PkbsimError):
    """A solution file cannot be read or parsed."""


@dataclass(frozen=True)
class Inspection:
    """What one solution file does, with the lines that show it."""

    file: str
    mechanisms: tuple[str, ...] = ()  # sorted names from vocab.MECHANISMS
    nccl_on_hot_path: tuple[str, ...] = ()  # e.g. "all_reduce", "barrier (metadata)"
    custom_kernels: int = 0
    host_barrier_per_call: bool = False
    device_barrier: bool = False
    host_sync: bool = False
    per_call_rendezvous: bool = False
    fused_comm_compute: bool = False
    overlap_attempt: bool = False
    one_shot: bool = False
    grid_capped: bool = False
    uncoalesced_peer: bool = False
    evidence: Evidence = field(default_factory=dict)  # name -> ((line, snippet), ...)
    notes: tuple[str, ...] = ()
    error: str | None = None  # set on a directory row whose file could not be inspected
    call_sites: tuple[CallSite, ...] = ()  # every data-moving call, placed on the path
    profile: str = PKB_PROFILE.describe()  # what the branches were evaluated under

    @property
    def flags(self) -> dict[str, bool]:
        return {name: bool(getattr(self, name)) for name in FLAGS}


def inspect_path(path: Path, profile: Profile = PKB_PROFILE) -> list[Inspection]:
    """A file, or every ``*.py`` under a folder: ``inspect_paths`` of one path."""
    return inspect_paths([path], profile)


def inspect_paths(paths: Sequence[Path], profile: Profile = PKB_PROFILE) -> list[Inspection]:
    """Files, and every ``*.py`` under folders (sorted); a folder's unreadable or unparsable
    file becomes a row with ``error`` set, a lone file's raises InspectError. Every path is
    found before any is inspected, so the bounds on entries walked, files and their bytes
    (``limits``: WALK_ENTRIES, SOURCE_FILES, SOURCE_TOTAL_BYTES) refuse a command up front."""
    walk = _Walk()
    found: list[tuple[Path, bool]] = []  # (file, found in a folder)
    for path in paths:
        path = path.expanduser()
        if path_kind(path, error=InspectError) == "folder":
            files = sorted(walk.folder(path))
            if not files:
                raise InspectError("no *.py files in this folder", file=str(path))
            found += [(file, True) for file in files]
        else:
            walk.add(path, str(path))
            found.append((path, False))
    rows = []
    for file, in_folder in found:
        try:
            rows.append(inspect_file(file, profile))
        except InspectError as exc:
            if not in_folder:
                raise
            rows.append(Inspection(file=str(file), error=exc.one_line()))
    return rows


class _Walk:
    """The files found for one command, their bytes and the entries looked at, each bounded."""

    def __init__(self) -> None:
        self.files = 0
        self.bytes = 0
        self.entries = 0

    def add(self, file: Path, named: str) -> None:
        """Count a file (an unreadable one as empty: reading it is the error)."""
        self.files += 1
        SOURCE_FILES.check(self.files, "solution files", InspectError, named)
        with contextlib.suppress(OSError):
            self.bytes += file.stat().st_size
        SOURCE_TOTAL_BYTES.check(self.bytes, "bytes of solution files", InspectError, named)

    def folder(self, root: Path) -> list[Path]:
        """Every ``*.py`` file under ``root``; links to folders are not followed and folders
        that cannot be listed are passed over (as ``Path.rglob`` does)."""
        files, stack = [], [root]
        while stack:
            try:
                entries = list(os.scandir(stack.pop()))
            except OSError:
                continue
            for entry in entries:
                self.entries += 1
                WALK_ENTRIES.check(self.entries, "files and folders looked at", InspectError,
                                   str(root))
                if entry.is_dir(follow_symlinks=False):
                    stack.append(Path(entry.path))
                elif entry.name.endswith(".py") and _is_file(entry):
                    files.append(Path(entry.path))
                    self.add(files[-1], str(root))
        return files


def _is_file(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_file()
    except OSError:
        return False


def inspect_file(path: Path, profile: Profile = PKB_PROFILE) -> Inspection:
    """One solution file: a regular file of at most SOURCE_BYTES (so memory stays bounded)."""
    source = read_source(path, limit=SOURCE_BYTES, error=InspectError)
    return inspect_source(source, str(path), profile)


def inspect_source(source: str, file: str, profile: Profile = PKB_PROFILE) -> Inspection:
    try:
        return _inspect(source, file, profile)
    except RecursionError:
        raise InspectError("nested too deeply to inspect", file=file) from None
    except InspectError:
        raise
    except Exception as exc:
        raise InspectError(f"the inspector failed on this file ({type(exc).__name__}: {exc}); "
                           "please report it", file=file) from exc


def _inspect(source: str, file: str, profile: Profile) -> Inspection:
    try:
        tree = ast.parse(source, filename=file)
    except SyntaxError as exc:
        raise InspectError(f"Python syntax error: {exc.msg}", file=file,
                           field=f"line {exc.lineno}" if exc.lineno else None) from None
    except (ValueError, MemoryError) as exc:  # null bytes; a parser stack overflow
        raise InspectError(f"not Python source: {exc or type(exc).__name__}",
                           file=file) from None
    py = PythonModel(tree, profile)
    ev = EvidenceLog(source.splitlines())
    sources = device_sources(py)
    kernels = [k for src in sources for k in c_kernels(src)]
    sites = [dataclasses.replace(s, snippet=_line(ev, s.line)) for s in call_sites(py, sources)]
    nccl = python_calls(py, ev, sites)
    python_peers(py, ev)
    for src in sources:
        c_patterns(src, ev)
    for kernel in kernels:
        c_kernel_flags(kernel, ev)
    triton_kernels(py, ev, sources)  # after the device sources: their peer lines count in kernels
    count = count_kernels(py, sources, kernels, ev)
    if count:  # symmetric-memory pointers handed to this file's own kernels
        ev.copy(SM_PEER_PTRS, "sm_peer_ldst")
    notes = [] if py.solutions else ["no solution() found: every function counts as per call"]
    has = ev.has
    return Inspection(
        file=file, mechanisms=tuple(sorted(m for m in MECHANISMS if has(m))),
        nccl_on_hot_path=tuple(nccl), custom_kernels=count,
        host_barrier_per_call=has("host_barrier_per_call"), device_barrier=has("device_barrier"),
        host_sync=has("host_sync"), per_call_rendezvous=has("per_call_rendezvous"),
        fused_comm_compute=has("fused_comm_compute"), overlap_attempt=has("overlap_attempt"),
        one_shot=has("one_shot"), grid_capped=has("grid_capped"),
        uncoalesced_peer=has("uncoalesced_peer"), evidence=ev.freeze(), notes=tuple(notes),
        call_sites=tuple(sites), profile=profile.describe())


def _line(ev: EvidenceLog, line: int) -> str:
    text = ev.lines[line - 1].strip() if 0 < line <= len(ev.lines) else ""
    return text[:SNIPPET_CHARS]
