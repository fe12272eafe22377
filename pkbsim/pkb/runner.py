"""Run PKB's reference and a candidate solution from the user's own PKB checkout.

Each variant is one child process, in its own process group, with a time limit:

    python -m torch.distributed.run --standalone --nproc-per-node W validate/pkb_run.py ...

``validate/pkb_run.py`` checks the candidate against the reference (5 trials, atol = rtol =
1e-2), times it with PKB's convention, then profiles ``profile_iters`` more calls (0: none).
Files, under OUT:

    logs/problem_<stem>/<backend>/rank_<r>_perf.json, rank_<r>.pt   PKB's layout and format
    logs/problem_<stem>/<backend>/rank_<r>_profile.json             what ran per call (below)
    logs/problem_<stem>/<backend>/rank_<r>_trace.json.gz            the profiled calls' Kineto trace
    runs/problem_<stem>/<backend>/console.log, rank_<r>.json         console; each rank's status

``rank_<r>_profile.json`` (``pkbsim.runprofile/1``, read by :mod:`pkbsim.pkb.run_profile`) is
what torch's profiler saw in those calls: kernels, NCCL kernels, memcpys by kind (PtoP, DtoD,
HtoD, DtoH) and memsets, each per call with its GPU time, and the host's CUDA runtime and
driver calls that copy, set or launch. On CPU its device lists are empty; a profiler failure
leaves ``error`` in it and does not fail the variant.

``backend`` is ``reference`` for the reference and, for the candidate, the suffix of a
solution named PKB's way (``<stem>_<backend>.py``), else ``candidate``. Statuses: ``ok``;
``wrong`` (some trial's output differs from the reference's on some rank); ``crash`` (a
non-zero exit, or a rank without its perf file: the first rank to fail gives the error);
``hang`` (still running at the time limit: the whole process tree is killed, the error says
where each rank was). The time of a variant is its slowest rank's (PKB's convention).

Nothing here prints.
"""

from __future__ import annotations

import contextlib
import importlib.util
import math
import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pkbsim.datafiles import nearest, validate_dir
from pkbsim.errors import PkbsimError, UsageError
from pkbsim.inputs import loads_json, path_kind, read_bytes
from pkbsim.limits import CPU_RANKS, RANK_FILE_BYTES
from pkbsim.processes import NO_MULTICAST, error_tail, exit_text, read_tail, run_in_group

SCRIPT = "pkb_run.py"
STATUSES = ("ok", "wrong", "crash", "hang")
DEVICES = ("cuda", "cpu")
DTYPES = ("bfloat16", "float16", "float32", "float64")
CPU_WORLD_SIZE = 2  # --device cpu without --world-size
COOLDOWN_S = 0.5  # PKB's pause between the reference and the candidate when timing
BACKEND_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
INPUTS_FILE = Path("utils") / "input_output_tensors.py"

OnStart = Callable[[str, Path], None]  # (backend, console log) as a variant starts


class PkbError(PkbsimError):
    """The PKB checkout, the problem or the candidate file cannot be used."""


@dataclass(frozen=True)
class Problem:
    stem: str  # e.g. 1_allreduce
    problem_id: int  # its leading number: create_input_tensor's problem_id
    reference: Path  # PKB_ROOT/reference/<stem>.py
    pkb_root: Path


@dataclass(frozen=True)
class RunOptions:
    world_size: int | None = None  # None: every GPU (cuda), CPU_WORLD_SIZE (cpu)
    device: str = "cuda"  # cuda (nccl) or cpu (gloo)
    timeout_s: float = 600.0  # per variant: torchrun start, builds, checks and timing
    trials: int = 5
    atol: float = 1e-2
    rtol: float = 1e-2
    warmup_iters: int = 500
    iters: int = 100
    rows: int = 1024  # PKB's --m, --n and --dtype
    cols: int = 1024
    dtype: str = "bfloat16"
    profile_iters: int = 10  # calls profiled after timing (rank_<r>_profile.json); 0: none


@dataclass(frozen=True)
class RankTime:
    """One rank's rank_<r>_perf.json: mean, spread and extremes per iteration."""

    rank: int
    time_us: float  # PKB's wall_time_ms
    std_us: float
    min_us: float
    max_us: float


@dataclass(frozen=True)
class VariantResult:
    backend: str  # the logs folder's name; "reference" for the reference
    status: str  # one of STATUSES
    error: str | None
    world_size: int | None  # as the ranks reported it (None: none started)
    ranks: tuple[RankTime, ...]  # the perf files found, by rank
    elapsed_s: float
    logs_dir: Path
    console_log: Path
    command: tuple[str, ...]

    @property
    def slowest(self) -> RankTime | None:
        return max(self.ranks, key=lambda r: r.time_us) if self.ranks else None


@dataclass(frozen=True)
class RunResult:
    problem: Problem
    reference: VariantResult
    candidate: VariantResult

    @property
    def speedup(self) -> float | None:
        """Reference time / candidate time, slowest ranks, when both are ok."""
        ref, cand = self.reference.slowest, self.candidate.slowest
        if self.reference.status != "ok" or self.candidate.status != "ok" or not ref or not cand:
            return None
        return ref.time_us / cand.time_us


# --- lookup ------------------------------------------------------------------------------------

def find_problem(pkb_root: Path, problem: str) -> Problem:
    """``problem`` by number (``1``) or stem (``1_allreduce``, ``.py`` optional) in the
    checkout's ``reference/`` folder, as PKB's run_local.py resolves it."""
    root = pkb_root.expanduser().absolute()
    if path_kind(root, error=PkbError, name=f"--pkb-root {root}") != "folder":
        raise PkbError("no such folder", file=str(root), field="--pkb-root")
    folder = root / "reference"
    if path_kind(folder, error=PkbError) != "folder":
        raise PkbError("not a PKB checkout: no reference/ folder", file=str(root))
    if path_kind(root / INPUTS_FILE, error=PkbError) != "file":
        raise PkbError(f"not a PKB checkout: no {INPUTS_FILE}", file=str(root))
    stems = sorted(p.stem for p in folder.glob("*.py"))
    raw = problem.strip().removesuffix(".py")
    if raw.isdigit() and len(raw) <= 9:
        found = [s for s in stems if _number(s) == int(raw)]
        if not found:
            numbers = sorted({n for n in map(_number, stems) if n is not None})
            span = f"{numbers[0]}-{numbers[-1]}" if numbers else "none"
            raise PkbError(f"no problem {raw}: no reference/{raw}_*.py (problems {span})",
                           file=str(folder), field="--problem")
        if len(found) > 1:
            raise PkbError(f"problem {raw} is ambiguous: {', '.join(found)}; give the stem",
                           file=str(folder), field="--problem")
        stem = found[0]
    elif raw in stems:
        stem = raw
    else:
        close = nearest(raw, stems)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise PkbError(f"no problem {raw!r}: no reference/{raw}.py{hint}", file=str(folder),
                       field="--problem")
    number = _number(stem)
    if number is None:
        raise PkbError(f"reference/{stem}.py: the name has no leading problem number",
                       file=str(folder), field="--problem")
    return Problem(stem, number, folder / f"{stem}.py", root)


def _number(stem: str) -> int | None:
    match = re.match(r"(\d{1,9})_", stem)
    return int(match.group(1)) if match else None


def candidate_backend(stem: str, solution: Path) -> str:
    """``cuda`` for ``1_allreduce_cuda.py`` (PKB's naming), else ``candidate``."""
    name = solution.stem
    suffix = name[len(stem) + 1:] if name.startswith(f"{stem}_") else ""
    if BACKEND_NAME.fullmatch(suffix) and suffix != "reference":
        return suffix
    return "candidate"


def check_options(options: RunOptions) -> None:
    o = options
    if o.world_size is not None and o.world_size < 1:
        raise UsageError(f"--world-size {o.world_size}: expected 1 or more")
    if o.device not in DEVICES:
        raise UsageError(f"--device {o.device!r}: expected one of {', '.join(DEVICES)}")
    if o.device == "cpu" and o.world_size is not None:
        CPU_RANKS.check(o.world_size, "--world-size with --device cpu")
    if not (o.timeout_s > 0 and math.isfinite(o.timeout_s)):
        raise UsageError(f"--timeout {o.timeout_s}: expected a number of seconds > 0")
    if o.dtype not in DTYPES:
        raise UsageError(f"dtype {o.dtype!r}: expected one of {', '.join(DTYPES)}")
    counts = {"trials": (o.trials, 1), "iters": (o.iters, 1), "warmup_iters": (o.warmup_iters, 0),
              "rows": (o.rows, 1), "cols": (o.cols, 1), "profile_iters": (o.profile_iters, 0)}
    for name, (value, least) in counts.items():
        if value < least:
            raise UsageError(f"{name} {value}: expected {least} or more")
    if not (o.atol >= 0 and o.rtol >= 0):
        raise UsageError(f"atol {o.atol}, rtol {o.rtol}: expected numbers >= 0")


def visible_gpus() -> int | None:
    """NVIDIA GPUs this process may use: /dev/nvidia<N> nodes, narrowed by
    CUDA_VISIBLE_DEVICES; None where that cannot be told (no /dev, another OS)."""
    dev = Path("/dev")
    if not dev.is_dir():
        return None
    present = sum(1 for p in dev.glob("nvidia*") if p.name[6:].isdigit())
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        present = min(present, len([d for d in listed.split(",") if d.strip()]))
    return present


def check_gpus(options: RunOptions) -> None:
    """With --device cuda: the GPUs exist and are enough for --world-size (one line, before
    any child starts)."""
    if options.device != "cuda":
        return
    gpus = visible_gpus()
    if gpus == 0:
        raise UsageError("--device cuda: this machine shows no NVIDIA GPU (no /dev/nvidia<N>, "
                         "or CUDA_VISIBLE_DEVICES is empty); use --device cpu to run on gloo")
    if gpus is not None and options.world_size is not None and options.world_size > gpus:
        raise UsageError(f"--world-size {options.world_size}: this machine shows {gpus} "
                         "NVIDIA GPU(s)")


# --- running -----------------------------------------------------------------------------------

def run_problem(pkb_root: Path, problem: str, solution: Path, out: Path,
                options: RunOptions | None = None, *, scripts: Path | None = None,
                on_start: OnStart | None = None) -> RunResult:
    """The reference, then the candidate, each in its own torchrun child process."""
    options = options or RunOptions()
    check_options(options)
    found = find_problem(pkb_root, problem)
    solution = solution.expanduser().absolute()
    if path_kind(solution, error=PkbError, name=f"--solution {solution}") != "file":
        raise PkbError("no such file", file=str(solution), field="--solution")
    script = _script(scripts)
    check_gpus(options)
    out = _prepare(out)
    reference = run_variant(found, None, "reference", out, options, script, on_start)
    time.sleep(COOLDOWN_S)
    backend = candidate_backend(found.stem, solution)
    candidate = run_variant(found, solution, backend, out, options, script, on_start)
    return RunResult(found, reference, candidate)


def _script(scripts: Path | None) -> Path:
    if importlib.util.find_spec("torch") is None:
        raise PkbError(f"torch is not installed for {sys.executable}; pkbsim run needs it "
                       "(and the CUDA build for --device cuda)")
    script = (scripts or validate_dir()) / SCRIPT
    if not script.is_file():
        raise PkbError("no such script", file=str(script))
    return script


def _prepare(out: Path) -> Path:
    out = out.expanduser().absolute()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot create folder ({exc.strerror})") from None
    return out


def variant_dirs(out: Path, stem: str, backend: str) -> tuple[Path, Path]:
    """(PKB logs folder, status and console folder) of one variant."""
    return (out / "logs" / f"problem_{stem}" / backend,
            out / "runs" / f"problem_{stem}" / backend)


def child_command(problem: Problem, solution: Path | None, logs_dir: Path, run_dir: Path,
                  options: RunOptions, script: Path) -> list[str]:
    o = options
    nproc = str(o.world_size) if o.world_size else (
        "gpu" if o.device == "cuda" else str(CPU_WORLD_SIZE))
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
            nproc, str(script), "--pkb-root", str(problem.pkb_root), "--reference",
            str(problem.reference), "--problem-id", str(problem.problem_id),
            *(["--solution", str(solution)] if solution else []),
            "--logs-dir", str(logs_dir), "--status-dir", str(run_dir), "--device", o.device,
            "--rows", str(o.rows), "--cols", str(o.cols), "--dtype", o.dtype,
            "--trials", str(o.trials), "--atol", repr(o.atol), "--rtol", repr(o.rtol),
            "--warmup-iters", str(o.warmup_iters), "--iters", str(o.iters),
            "--profile-iters", str(o.profile_iters)]


def run_variant(problem: Problem, solution: Path | None, backend: str, out: Path,
                options: RunOptions, script: Path, on_start: OnStart | None = None
                ) -> VariantResult:
    """One torchrun child: the reference (``solution`` None) or the candidate. Files of an
    earlier run of the same problem and backend are replaced."""
    logs_dir, run_dir = variant_dirs(out, problem.stem, backend)
    for folder, patterns in ((logs_dir, ("rank_*_perf.json", "rank_*_profile.json",
                                         "rank_*_trace.json.gz", "rank_*.pt")),
                             (run_dir, ("rank_*.json",))):
        folder.mkdir(parents=True, exist_ok=True)
        for pattern in patterns:
            for stale in folder.glob(pattern):
                stale.unlink()
    cmd = child_command(problem, solution, logs_dir, run_dir, options, script)
    console = run_dir / "console.log"
    if on_start:
        on_start(backend, console)
    env = {**os.environ, **NO_MULTICAST, "PYTHONUNBUFFERED": "1"}
    start = time.monotonic()
    code = run_in_group(cmd, console, env, options.timeout_s)
    elapsed_s = round(time.monotonic() - start, 3)
    statuses = read_statuses(run_dir)
    world_size = _world_size(statuses, options)
    ranks, missing = read_perf(logs_dir, world_size)
    status, error = classify(code, options.timeout_s, statuses, world_size, missing,
                             read_tail(console))
    return VariantResult(backend, status, error, world_size if statuses else None, ranks,
                         elapsed_s, logs_dir, console, tuple(cmd))


def _world_size(statuses: dict[int, dict[str, Any]], options: RunOptions) -> int:
    sizes = [s.get("world_size") for s in statuses.values()]
    known = [n for n in sizes if isinstance(n, int) and n > 0]
    if known:
        return max(known)
    return options.world_size or (1 if options.device == "cuda" else CPU_WORLD_SIZE)


# --- reading back ------------------------------------------------------------------------------

def read_statuses(run_dir: Path) -> dict[int, dict[str, Any]]:
    """Each rank's last status (rank_<r>.json), by rank; unreadable files are left out."""
    found: dict[int, dict[str, Any]] = {}
    for path in run_dir.glob("rank_*.json"):
        match = re.fullmatch(r"rank_(\d{1,7})\.json", path.name)
        if not match:
            continue
        with contextlib.suppress(PkbsimError):  # a candidate may have broken it
            data = loads_json(read_bytes(path, limit=RANK_FILE_BYTES), file=str(path))
            if isinstance(data, dict):
                found[int(match.group(1))] = data
    return dict(sorted(found.items()))


def read_perf(logs_dir: Path, world_size: int) -> tuple[tuple[RankTime, ...], list[str]]:
    """(the ranks' times, what is missing or malformed) from rank_<r>_perf.json files."""
    ranks: list[RankTime] = []
    missing: list[str] = []
    for rank in range(world_size):
        path = logs_dir / f"rank_{rank}_perf.json"
        if not path.exists():
            missing.append(f"rank {rank} wrote no {path.name}")
            continue
        try:
            data = loads_json(read_bytes(path, limit=RANK_FILE_BYTES), file=str(path))
            values = [float(data[key]) for key in ("wall_time_ms", "wall_time_std_ms",
                                                   "min_time_ms", "max_time_ms")]
        except PkbsimError as exc:
            missing.append(f"{path.name}: unreadable ({exc.message})")
            continue
        except (ValueError, KeyError, TypeError, OverflowError) as exc:
            missing.append(f"{path.name}: unreadable ({type(exc).__name__}: {exc})")
            continue
        if not (values[0] > 0 and all(math.isfinite(v) for v in values)):
            missing.append(f"{path.name}: wall_time_ms {values[0]} is not a positive time")
            continue
        time_ms, std_ms, min_ms, max_ms = values
        ranks.append(RankTime(rank, time_ms * 1e3, std_ms * 1e3, min_ms * 1e3, max_ms * 1e3))
    return tuple(ranks), missing


def classify(code: int | None, timeout_s: float, statuses: dict[int, dict[str, Any]],
             world_size: int, missing: list[str], console: str) -> tuple[str, str | None]:
    """(status, error) of one variant; ``code`` None when it was killed at ``timeout_s``."""
    if code is None:
        return "hang", (f"no result after {timeout_s:g} s; process tree killed; "
                        f"{where(statuses, world_size)}")
    wrong = [s for s in statuses.values() if s.get("status") == "wrong" and s.get("error")]
    if wrong:
        return "wrong", str(wrong[0]["error"])
    crashed = [s for s in statuses.values() if s.get("status") == "crash" and s.get("error")]
    if crashed:  # the first to fail is the cause; the others lost their peer
        return "crash", str(min(crashed, key=lambda s: float(s.get("time_s") or 0))["error"])
    if code != 0:
        tail = error_tail(console)
        return "crash", f"{exit_text(code)}: {tail}" if tail else exit_text(code)
    if missing:
        return "crash", "; ".join(missing)
    return "ok", None


def where(statuses: dict[int, dict[str, Any]], world_size: int) -> str:
    """Where each rank was: ``every rank in 'timing'``, or phase by phase."""
    phases: dict[str, list[int]] = {}
    for rank in range(world_size):
        phase = statuses.get(rank, {}).get("phase")
        phases.setdefault(f"in {phase!r}" if phase else "not started", []).append(rank)
    if len(phases) == 1:
        (phase,) = phases
        return f"every rank {phase}"
    return "; ".join(f"rank{'s' if len(r) > 1 else ''} {', '.join(map(str, r))} {phase}"
                     for phase, r in phases.items())
