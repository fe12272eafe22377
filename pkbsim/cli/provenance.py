"""What an HTML report records about its run (pkbsim.report.html_page.Provenance): the command
as pkbsim parsed it, the date, and each input file or folder with its sha256.

The command line is rebuilt from the parsed options (every option not at its default, in the
order ``--help`` lists them), so it reads the same however pkbsim was started. The date is now
in UTC, or ``SOURCE_DATE_EPOCH`` (seconds) when set, so a page can be rebuilt byte for byte.
"""

from __future__ import annotations

import hashlib
import os
import shlex
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from pkbsim.report.html_page import Provenance

if TYPE_CHECKING:
    from pkbsim.task.schema import TaskSpec
    from pkbsim.topology.schema import Topology


def provenance(command: str, topology: str, inputs: Iterable[tuple[str, str]]) -> Provenance:
    return Provenance(command, run_date(), topology, tuple(inputs))


def command_line(ctx: typer.Context) -> str:
    """``pkbsim COMMAND`` and every option whose value is not its default."""
    words = ctx.command_path.split()
    for param in ctx.command.params:
        if getattr(param, "param_type_name", "") == "option" and param.name in ctx.params:
            words += _option_words(param, ctx.params[param.name])
    return shlex.join(words)


def _option_words(param: Any, value: Any) -> list[str]:
    if value is None or value == param.default or (param.multiple and not value):
        return []
    if param.is_flag:
        flags: list[str] = param.opts if value else param.secondary_opts
        return flags[:1]
    values = value if param.multiple else [value]
    return [w for v in values for w in (str(param.opts[0]), _text(v))]


def _text(value: Any) -> str:
    return str(value.value) if isinstance(value, Enum) else str(value)


def run_date() -> str:
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    when = (datetime.fromtimestamp(int(epoch), timezone.utc) if epoch.isdigit()
            else datetime.now(timezone.utc))
    return when.strftime("%Y-%m-%d %H:%M:%S UTC")


def path_input(path: Path | str) -> str:
    """A file as ``PATH (sha256 HEX)``; a folder as ``PATH (folder: N files, sha256 HEX)``,
    the hash over the sorted lines ``RELATIVE_PATH FILE_SHA256`` of its files (see
    :func:`listing_sha256`); anything else as the path alone."""
    p = Path(path).expanduser()
    if p.is_file():
        return f"{path} (sha256 {_file_sha256(p)})"
    if p.is_dir():
        files = sorted(f for f in p.rglob("*") if f.is_file())
        digest = listing_sha256((f.relative_to(p).as_posix(), _file_sha256(f)) for f in files)
        return f"{path} (folder: {len(files)} files, sha256 {digest})"
    return str(path)


def topology_inputs(topologies: Iterable[Topology]) -> list[tuple[str, str]]:
    """Each topology's file (shipped ones as ``topologies/NAME.yaml``) and sha256."""
    return [("topology", f"{_shown(t.file)} (sha256 {t.sha256})" if t.file else t.name)
            for t in topologies]


def named_inputs(topologies: Iterable[str], tasks: Iterable[str]) -> list[tuple[str, str]]:
    """Topologies and tasks by name, id or path: each one's file and sha256 (one that does
    not load is listed by its name; its points carry the error)."""
    from pkbsim.errors import PkbsimError
    from pkbsim.task.loader import load_task
    from pkbsim.topology import load_topology

    out = []
    for name in dict.fromkeys(topologies):
        try:
            out += topology_inputs([load_topology(name)])
        except PkbsimError:
            out.append(("topology", name))
    specs = []
    for name in dict.fromkeys(tasks):
        try:
            specs.append(load_task(name))
        except PkbsimError:
            out.append(("task", name))
    return out + task_inputs(specs)


def task_inputs(specs: Sequence[TaskSpec], most: int = 4) -> list[tuple[str, str]]:
    """Each task file and its sha256; more than ``most``: their number and one sha256 over the
    sorted lines ``FILE SHA256`` (:func:`listing_sha256`)."""
    files = [(_shown(s.file), s.sha256) if s.file else (s.name, s.sha256) for s in specs]
    if len(files) <= most:
        return [("task", f"{f} (sha256 {sha})") for f, sha in files]
    return [("tasks", f"{len(files)} task files (sha256 of their sorted 'FILE SHA256' lines "
                      f"{listing_sha256(files)})")]


def _shown(file: str) -> str:
    from pkbsim.datafiles import display_path

    return display_path(file)


def listing_sha256(entries: Iterable[tuple[str, str]]) -> str:
    """The sha256 of the sorted lines ``NAME SHA256``: one hash for a set of files."""
    text = "".join(f"{name} {sha}\n" for name, sha in sorted(entries))
    return hashlib.sha256(text.encode()).hexdigest()


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
