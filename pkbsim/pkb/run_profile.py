"""What a ``pkbsim run`` actually executed per solution() call: ``rank_<r>_profile.json``.

``validate/pkb_run.py --profile-iters N`` (``pkbsim run`` passes 10 by default) profiles N calls
after timing, with torch's profiler, and writes beside ``rank_<r>_perf.json``

    logs/problem_<stem>/<backend>/rank_<r>_profile.json

a JSON object (schema ``pkbsim.runprofile/1``): ``rank``, ``world_size``, ``variant``
(``reference`` or ``candidate``), ``solution`` (the candidate's path or null), ``device``,
``iterations`` (N), ``torch_version``, ``nccl_version`` (or null), an optional ``error`` (the
profiler failed: the lists are then empty), and five lists, each entry with ``per_call`` (count
over N):

- ``kernels`` and ``nccl_kernels`` (a name holding "nccl"): ``name``, ``gpu_us_per_call``;
- ``memcpy``: ``kind`` (PtoP, DtoD, HtoD, DtoH: the word after "Memcpy" in the profiler's
  name), ``gpu_us_per_call``, ``bytes_per_call`` (null where the profiler gave no bytes);
- ``memset``: ``kind``, ``gpu_us_per_call``;
- ``runtime``: ``name`` of a host CUDA runtime or driver call that copies, sets or launches
  (cudaMemcpy*, cuMemcpy*, cudaLaunchKernel*, cuLaunchKernel*, cudaMemset*);
- ``collectives`` (optional, empty when absent): ``name`` of a PyTorch collective op the host
  called (``c10d::allreduce_``, ``_c10d_functional::all_reduce``). At W = 1 NCCL runs an
  all-reduce without any kernel, so ``nccl_kernels`` is empty even for PKB's reference and only
  this list shows that NCCL was called.

The problem's stem and the backend come from the path when it has PKB's shape. Keys the schema
does not name are ignored. Every malformed input raises :class:`RunProfileError` naming the
file and the field. Pure: no torch.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pkbsim.errors import PkbsimError
from pkbsim.inputs import loads_json, path_kind, read_bytes
from pkbsim.limits import RANK_FILE_BYTES

SCHEMA = "pkbsim.runprofile/1"
PROBLEM_PREFIX = "problem_"
_PROFILE_FILE = re.compile(r"^rank_(\d{1,7})_profile\.json$")  # at most 7 digits: a rank
_LISTS = {  # list -> (the key naming an entry, its optional numeric fields)
    "kernels": ("name", ("gpu_us_per_call",)),
    "nccl_kernels": ("name", ("gpu_us_per_call",)),
    "memcpy": ("kind", ("gpu_us_per_call", "bytes_per_call")),
    "memset": ("kind", ("gpu_us_per_call",)),
    "runtime": ("name", ()),
    "collectives": ("name", ()),
}
_OPTIONAL_LISTS = ("collectives",)


class RunProfileError(PkbsimError):
    """A run profile (rank_<r>_profile.json) is missing or malformed."""


@dataclass(frozen=True)
class ProfiledOp:
    name: str  # kernel name, or memcpy kind (PtoP, DtoD, HtoD, DtoH), "memset", or API name
    per_call: float  # events per solution() call
    gpu_us_per_call: float | None = None
    bytes_per_call: float | None = None


@dataclass(frozen=True)
class RunProfile:
    file: str
    problem: str | None  # the stem of logs/problem_<stem>/<backend>/, when the path has it
    backend: str | None
    rank: int
    world_size: int
    variant: str  # "reference" or "candidate"
    solution: str | None
    iterations: int  # calls profiled
    kernels: tuple[ProfiledOp, ...]  # non-NCCL kernels
    nccl_kernels: tuple[ProfiledOp, ...]
    memcpy: tuple[ProfiledOp, ...]
    memset: tuple[ProfiledOp, ...]
    runtime: tuple[ProfiledOp, ...]
    error: str | None = None  # the profiler failed; the lists are empty
    device: str | None = None  # cuda or cpu
    torch_version: str | None = None
    nccl_version: str | None = None
    collectives: tuple[ProfiledOp, ...] = ()  # host-side c10d ops

    def nccl_per_call(self) -> float:
        """NCCL kernels per call, all names together."""
        return sum(op.per_call for op in self.nccl_kernels)

    def memcpy_per_call(self, *kinds: str) -> float:
        """Memcpys per call of these kinds (PtoP, DtoD, ...); of every kind when none given."""
        return sum(op.per_call for op in self.memcpy if not kinds or op.name in kinds)

    def runtime_per_call(self, prefix: str) -> float:
        """Host CUDA API calls per call whose name starts with ``prefix`` (cudaMemcpyPeer)."""
        return sum(op.per_call for op in self.runtime if op.name.startswith(prefix))

    def collectives_per_call(self, prefix: str = "") -> float:
        """Host-side collective ops per call whose name starts with ``prefix`` (every one when
        it is empty): ``c10d::allreduce_`` is one ``dist.all_reduce``."""
        return sum(op.per_call for op in self.collectives if op.name.startswith(prefix))


# ---------------------------------------------------------------- entry points

def load_run_profiles(path: Path) -> list[RunProfile]:
    """One profile file, or every ``rank_<r>_profile.json`` under a folder (by folder, then
    rank); a folder with none is an error."""
    path = Path(path)
    kind = path_kind(path, error=RunProfileError)
    if kind == "folder":
        files = _profile_files(path)
        if not files:
            raise RunProfileError("no rank_<r>_profile.json found (pkbsim run writes them in "
                                  "logs/problem_<stem>/<backend>/)", file=str(path))
        return [load_run_profile(f) for f in files]
    if kind == "missing":
        raise RunProfileError("no such file or folder", file=str(path))
    return [load_run_profile(path)]


def load_run_profile(path: Path) -> RunProfile:
    """One ``rank_<r>_profile.json``."""
    file = str(path)
    data = loads_json(read_bytes(path, limit=RANK_FILE_BYTES, error=RunProfileError),
                      file=file, error=RunProfileError)
    if not isinstance(data, dict):
        raise RunProfileError("expected a JSON object", file=file)
    schema = data.get("schema")
    if schema != SCHEMA:
        raise RunProfileError(f"expected {SCHEMA!r}, got {_show(schema)}", file=file,
                              field="schema")
    rank = _count(data, "rank", file)
    world_size = _count(data, "world_size", file)
    if world_size < 1 or rank >= world_size:
        raise RunProfileError(f"rank {rank} of world_size {world_size}: expected "
                              "0 <= rank < world_size", file=file, field="world_size")
    match = _PROFILE_FILE.match(Path(path).name)
    if match and int(match.group(1)) != rank:
        raise RunProfileError(f"{rank}, but the file is named for rank {match.group(1)}",
                              file=file, field="rank")
    problem, backend = _path_names(Path(path))
    variant = _text(data, "variant", file)
    if not variant:
        raise RunProfileError("empty", file=file, field="variant")
    return RunProfile(
        file=file, problem=problem, backend=backend, rank=rank, world_size=world_size,
        variant=variant, solution=_text(data, "solution", file, null=True),
        iterations=_count(data, "iterations", file), kernels=_ops(data, "kernels", file),
        nccl_kernels=_ops(data, "nccl_kernels", file), memcpy=_ops(data, "memcpy", file),
        memset=_ops(data, "memset", file), runtime=_ops(data, "runtime", file),
        error=_text(data, "error", file, null=True, missing=True),
        device=_text(data, "device", file, null=True, missing=True),
        torch_version=_text(data, "torch_version", file, null=True, missing=True),
        nccl_version=_text(data, "nccl_version", file, null=True, missing=True),
        collectives=_ops(data, "collectives", file))


# ---------------------------------------------------------------- files and paths

def _profile_files(root: Path) -> list[Path]:
    """rank_*_profile.json under ``root`` (links to folders not followed), by folder and rank."""
    found: list[tuple[str, int, Path]] = []
    for folder, _dirs, names in os.walk(root):
        for name in names:
            if not (name.startswith("rank_") and name.endswith("_profile.json")):
                continue
            match = _PROFILE_FILE.match(name)
            path = Path(folder) / name
            if not match:
                raise RunProfileError("expected a file name rank_<integer>_profile.json",
                                      file=str(path))
            found.append((folder, int(match.group(1)), path))
    return [path for _folder, _rank, path in sorted(found)]


def _path_names(path: Path) -> tuple[str | None, str | None]:
    """(problem stem, backend) of ``.../problem_<stem>/<backend>/rank_<r>_profile.json``."""
    backend, problem = path.parent.name, path.parent.parent.name
    if problem.startswith(PROBLEM_PREFIX) and len(problem) > len(PROBLEM_PREFIX) and backend:
        return problem[len(PROBLEM_PREFIX):], backend
    return None, None


# ---------------------------------------------------------------- fields

def _ops(data: dict[str, Any], key: str, file: str) -> tuple[ProfiledOp, ...]:
    label, numbers = _LISTS[key]
    if key not in data:
        if key in _OPTIONAL_LISTS:
            return ()
        raise RunProfileError("missing", file=file, field=key)
    items = data[key]
    if not isinstance(items, list):
        raise RunProfileError(f"expected a list, got {_show(items)}", file=file, field=key)
    ops = []
    for i, item in enumerate(items):
        where = f"{key}[{i}]"
        if not isinstance(item, dict):
            raise RunProfileError(f"expected an object, got {_show(item)}", file=file,
                                  field=where)
        name = _text(item, label, file, where=where)
        if not name:
            raise RunProfileError("empty", file=file, field=f"{where}.{label}")
        per_call = _number(item, "per_call", file, where)
        values = {n: _number(item, n, file, where, null=True) for n in numbers}
        ops.append(ProfiledOp(name, per_call or 0.0, values.get("gpu_us_per_call"),
                              values.get("bytes_per_call")))
    return tuple(ops)


def _count(data: dict[str, Any], key: str, file: str) -> int:
    if key not in data:
        raise RunProfileError("missing", file=file, field=key)
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise RunProfileError(f"expected an integer, got {_show(value)}", file=file, field=key)
    if value < 0:
        raise RunProfileError(f"expected 0 or more, got {value}", file=file, field=key)
    return value


def _number(item: dict[str, Any], key: str, file: str, where: str, null: bool = False
            ) -> float | None:
    """A finite number >= 0 (None where ``null`` allows it)."""
    field = f"{where}.{key}"
    if key not in item:
        raise RunProfileError("missing", file=file, field=field)
    value = item[key]
    if value is None and null:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        kind = "a number or null" if null else "a number"
        raise RunProfileError(f"expected {kind}, got {_show(value)}", file=file, field=field)
    if not (math.isfinite(value) and value >= 0):
        raise RunProfileError(f"expected a number >= 0, got {value:g}", file=file, field=field)
    return float(value)


def _text(data: dict[str, Any], key: str, file: str, *, null: bool = False,
          missing: bool = False, where: str | None = None) -> Any:
    """A string (None where ``null`` allows null, or ``missing`` allows the key's absence)."""
    field = f"{where}.{key}" if where else key
    if key not in data:
        if missing:
            return None
        raise RunProfileError("missing", file=file, field=field)
    value = data[key]
    if value is None and null:
        return None
    if not isinstance(value, str):
        kind = "a string or null" if null else "a string"
        raise RunProfileError(f"expected {kind}, got {_show(value)}", file=file, field=field)
    return value


def _show(value: Any) -> str:
    """A value as an error shows it: short, on one line."""
    text = " ".join(repr(value).split())
    return text if len(text) <= 60 else text[:57] + "..."
