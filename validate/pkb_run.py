"""One PKB problem, one variant: check a candidate against PKB's reference, time it PKB's way.

Run by ``pkbsim run`` under torchrun, one process per GPU (never imported by pkbsim):

    python -m torch.distributed.run --standalone --nproc-per-node W validate/pkb_run.py \\
        --pkb-root PKB --reference PKB/reference/1_allreduce.py --problem-id 1 \\
        [--solution FILE] --logs-dir OUT/logs/problem_1_allreduce/cuda \\
        --status-dir OUT/runs/problem_1_allreduce/cuda [--device cpu]

Without --solution it times the reference. What it does follows PKB's ``run_local.py`` and
``scripts/worker.py`` (the facts, not their code):

- Inputs come from the checkout's own ``utils/input_output_tensors.py``:
  ``create_input_tensor(rank, W, problem_id, (rows, cols), dtype, trial=t, device=dev)``, PKB's
  defaults 1024 x 1024 bfloat16; the checkout is put first on sys.path (solutions import
  ``utils.*``).
- Correctness (with --solution): for each of --trials (5) trials, inputs of trial t are built
  twice (same seed, same values), one set for the reference, one for the candidate; the outputs
  are compared rank by rank in the form PKB saves them (a tuple or list becomes
  ``{"output_i": ...}``): keys, lengths and shapes exactly, tensors as float32 with
  ``torch.allclose(atol, rtol)`` (1e-2 each), anything else with ``==``. A mismatch on any rank
  ends the run on every rank before timing (exit 3).
- Timing (PKB's ``measure_solution_performance`` convention): the first tensor argument, or
  the first tensor inside the first list/tuple argument, is cloned into input groups: 1 when it
  is at least 3 x L2, else floor(3 x L2 / bytes) + 1, at least 2 and at most 128; iteration i
  uses group i mod groups. 500 warm-up iterations, a synchronize, then 100 timed iterations
  between CUDA events (one before the first, one after each, no host sync in between), one
  synchronize. wall_time_ms = total / iterations; std is the sample std of the per-iteration
  times around that mean. On CPU (--device cpu, gloo): perf_counter stamps at the same points,
  a barrier before the warm-up and before the timed loop.
- L2 is 50 MiB on every device: PKB asks torch for ``l2_cache_size``, which torch's device
  properties lack (they say ``L2_cache_size``), so PKB always falls back to its 50 MiB default.
  We use the value PKB ends up with, so ``num_input_groups`` matches its logs.
- Output, per rank, in --logs-dir: ``rank_<r>_perf.json`` (PKB's keys and types, indent 2) and
  ``rank_<r>.pt`` (this variant's output on trial 0's inputs, stored as PKB stores it).
- Profile (--profile-iters N > 0, after timing): one untimed call, a synchronize and a barrier,
  then N calls and a synchronize under ``torch.profiler`` (CPU, plus CUDA where there is a GPU).
  ``rank_<r>_profile.json`` (schema ``pkbsim.runprofile/1``, read by pkbsim/pkb/run_profile.py)
  says what ran per call: kernels and NCCL kernels (a name holding "nccl") with their GPU time,
  memcpys by kind (the word after "Memcpy": PtoP, DtoD, HtoD, DtoH) with bytes where the
  profiler gives them (else null), memsets, and the host's CUDA runtime and driver calls that
  copy, set or launch (cudaMemcpy*, cuMemcpy*, cudaLaunchKernel*, cuLaunchKernel*,
  cudaMemset*), and PyTorch's collective ops as the host called them (``c10d::*``,
  ``_c10d_functional::*``: at W = 1 NCCL's all-reduce launches no kernel, so only these show
  that it was called). ``per_call`` is a count over N. A profiler failure does not fail the
  run: the file then holds ``error`` and empty lists. On CPU the device lists are empty.
  Each profiled call runs inside ``record_function("ProfilerStep#<i>")`` (i = 1..N, the name
  torch.profiler's own schedule gives each step) with a CUDA event recorded before the first
  and after each call, as the timed loop does: ``call_event_us`` lists each call's time between
  its two events. The profiler's Chrome/Kineto trace of those N calls is written beside it as
  ``rank_<r>_trace.json.gz`` (``trace_file`` names it) unless it exceeds TRACE_MAX_BYTES
  compressed (``trace_error`` then says so and no trace is kept).
- Status, per rank: ``--status-dir/rank_<r>.json`` is rewritten at each phase (pid, phase,
  status running/ok/wrong/crash, error, time_s): the runner tells a wrong result from a crash
  by it, the first rank to crash from those that failed after it, and where each rank was when
  a run hangs.

Exit 0: ok; 3: wrong output; 1: a crash. Either failure ends with one line on stderr.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

# NVLink multicast stays off unless the caller set otherwise (it can disrupt a shared node).
for _key, _value in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
                     ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ.setdefault(_key, _value)

import torch  # noqa: E402  (after the environment is set)
import torch.distributed as dist  # noqa: E402

PKB_L2_BYTES = 50 * 1024**2  # what PKB's L2 lookup returns on every device (see above)
MAX_INPUT_GROUPS = 128
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
          "float64": torch.float64}
EXIT_CRASH, EXIT_WRONG = 1, 3
ERROR_CHARS = 300
PROFILE_SCHEMA = "pkbsim.runprofile/1"
RUNTIME_PREFIXES = ("cudaMemcpy", "cuMemcpy", "cudaLaunchKernel", "cuLaunchKernel", "cudaMemset")
COLLECTIVE_PREFIXES = ("c10d::", "_c10d_functional::")  # PyTorch's collective ops, on the host
DEVICE_KINDS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
SKIPPED_ACTIVITIES = ("gpu_user_annotation", "cuda_sync", "cuda_event")  # kineto's names
TRACE_MAX_BYTES = 16 * 1024**2  # a rank's kept trace, gzip-compressed
STEP_NAME = "ProfilerStep#{}"  # torch.profiler's step annotation, which pkbsim's reader splits on


class WrongOutput(Exception):
    """The candidate's output differs from the reference's on some rank."""


# --- status file -------------------------------------------------------------------------------

class Status:
    """This rank's ``rank_<r>.json`` in the status folder, replaced atomically at each change."""

    def __init__(self, folder: str, rank: int, world_size: int, variant: str) -> None:
        self.path = Path(folder) / f"rank_{rank}.json"
        self.state: dict[str, Any] = {"rank": rank, "world_size": world_size, "pid": os.getpid(),
                                      "variant": variant, "phase": "start",
                                      "status": "running", "error": None}

    def update(self, **changes: Any) -> None:
        self.state.update(changes, time_s=time.time())  # the earliest crash is the cause
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self.state))
        os.replace(tmp, self.path)


# --- loading -----------------------------------------------------------------------------------

def load_module(path: str, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path}: cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def solution_of(path: str, name: str) -> Callable[..., Any]:
    function = getattr(load_module(path, name), "solution", None)
    if not callable(function):
        raise AttributeError(f"{path}: defines no solution(...) function")
    return function


# --- correctness -------------------------------------------------------------------------------

def saved_form(output: Any) -> Any:
    """``output`` as PKB stores it in rank_<r>.pt: tensors detached; a tuple or list becomes
    ``{"output_i": ...}``; a dict keeps its keys. Tensors stay on their device."""
    def leaf(value: Any) -> Any:
        return value.detach() if isinstance(value, torch.Tensor) else value

    if isinstance(output, (tuple, list)):
        return {f"output_{i}": leaf(v) for i, v in enumerate(output)}
    if isinstance(output, dict):
        return {k: leaf(v) for k, v in output.items()}
    return leaf(output)


def to_cpu(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.cpu()
    if isinstance(value, dict):
        return {k: to_cpu(v) for k, v in value.items()}
    return value


def mismatch(expected: Any, got: Any, atol: float, rtol: float, where: str = "output"
             ) -> str | None:
    """Where and how ``got`` differs from ``expected`` (both in saved form), or None."""
    if isinstance(expected, dict) and isinstance(got, dict):
        if set(expected) != set(got):
            return (f"{where}: keys differ (only in reference {sorted(set(expected) - set(got))}, "
                    f"only in candidate {sorted(set(got) - set(expected))})")
        for key in sorted(expected, key=str):
            found = mismatch(expected[key], got[key], atol, rtol, f"{where}.{key}")
            if found:
                return found
        return None
    if isinstance(expected, (tuple, list)) and isinstance(got, (tuple, list)):
        if len(expected) != len(got):
            return f"{where}: length {len(got)}, reference {len(expected)}"
        for i, (a, b) in enumerate(zip(expected, got, strict=True)):
            found = mismatch(a, b, atol, rtol, f"{where}[{i}]")
            if found:
                return found
        return None
    if isinstance(expected, torch.Tensor) and isinstance(got, torch.Tensor):
        if expected.shape != got.shape:
            return f"{where}: shape {tuple(got.shape)}, reference {tuple(expected.shape)}"
        a, b = expected.float(), got.float().to(expected.device)
        if torch.allclose(a, b, atol=atol, rtol=rtol):
            return None
        diff = (a - b).abs()
        worst = int(torch.nan_to_num(diff, nan=float("inf")).argmax())
        return (f"{where}: not allclose (atol={atol:g}, rtol={rtol:g}): max |diff| "
                f"{float(diff.max()):.6g} at flat index {worst} (reference "
                f"{float(a.flatten()[worst]):.6g}, candidate {float(b.flatten()[worst]):.6g})")
    if type(expected) is not type(got) and (isinstance(expected, torch.Tensor)
                                            or isinstance(got, torch.Tensor)):
        return f"{where}: {type(got).__name__}, reference {type(expected).__name__}"
    try:
        same = bool(expected == got)
    except Exception as exc:  # an exotic value whose == fails
        return f"{where}: cannot compare ({exc!r})"
    return None if same else f"{where}: {got!r}, reference {expected!r}"


# --- timing ------------------------------------------------------------------------------------

def num_input_groups(input_bytes: int, l2_bytes: int) -> int:
    """Buffers to rotate so that they fill 3 x L2: 1 if one is already that large."""
    if input_bytes <= 0 or input_bytes >= 3 * l2_bytes:
        return 1
    return min(max(2, 3 * l2_bytes // input_bytes + 1), MAX_INPUT_GROUPS)


def timed_argument(args: tuple[Any, ...]
                   ) -> tuple[torch.Tensor, Callable[[torch.Tensor], tuple[Any, ...]]]:
    """The tensor PKB rotates (the first tensor argument, else the first tensor one level inside
    a list/tuple argument) and a function giving the arguments with it replaced."""
    for i, arg in enumerate(args):
        if isinstance(arg, torch.Tensor):
            return arg, lambda t, i=i: (*args[:i], t, *args[i + 1:])
    for i, arg in enumerate(args):
        if isinstance(arg, (list, tuple)):
            for j, item in enumerate(arg):
                if isinstance(item, torch.Tensor):
                    def swap(t: torch.Tensor, i: int = i, j: int = j) -> tuple[Any, ...]:
                        inner = list(args[i])
                        inner[j] = t
                        return (*args[:i], type(args[i])(inner), *args[i + 1:])
                    return item, swap
    raise TypeError("the inputs hold no tensor to time with (PKB times the first tensor)")


def perf_record(per_iter_ms: list[float], total_ms: float, warmup_iters: int, groups: int,
                l2_bytes: int, tensor_bytes: int) -> dict[str, Any]:
    """PKB's rank_<r>_perf.json: keys, order and types as its measure_solution_performance."""
    n = len(per_iter_ms)
    mean_ms = total_ms / n
    std_ms = (sum((t - mean_ms) ** 2 for t in per_iter_ms) / (n - 1)) ** 0.5 if n > 1 else 0.0
    return {"wall_time_ms": mean_ms, "wall_time_total_ms": total_ms, "wall_time_std_ms": std_ms,
            "min_time_ms": min(per_iter_ms), "max_time_ms": max(per_iter_ms), "iterations": n,
            "warmup_iterations": warmup_iters, "num_input_groups": float(groups),
            "l2_cache_size_bytes": float(l2_bytes), "timed_tensor_bytes": float(tensor_bytes)}


def time_solution(fn: Callable[..., Any], args: tuple[Any, ...], cuda: bool, warmup_iters: int,
                  iters: int, per_iter_out: list[float] | None = None) -> dict[str, Any]:
    """PKB's perf record; ``per_iter_out`` (if given) receives each timed iteration in ms."""
    tensor, with_tensor = timed_argument(args)
    tensor_bytes = tensor.element_size() * tensor.numel()
    groups = num_input_groups(tensor_bytes, PKB_L2_BYTES)
    inputs = [with_tensor(tensor.clone()) for _ in range(groups)]
    if cuda:
        torch.cuda.synchronize()
        for i in range(warmup_iters):
            fn(*inputs[i % groups])
        torch.cuda.synchronize()
        events = [torch.cuda.Event(enable_timing=True) for _ in range(iters + 1)]
        events[0].record()
        for i in range(iters):
            fn(*inputs[i % groups])
            events[i + 1].record()
        torch.cuda.synchronize()
        per_iter = [float(events[i].elapsed_time(events[i + 1])) for i in range(iters)]
        total = float(events[0].elapsed_time(events[iters]))
    else:
        dist.barrier()
        for i in range(warmup_iters):
            fn(*inputs[i % groups])
        dist.barrier()
        stamps = [time.perf_counter()]
        for i in range(iters):
            fn(*inputs[i % groups])
            stamps.append(time.perf_counter())
        per_iter = [(stamps[i + 1] - stamps[i]) * 1e3 for i in range(iters)]
        total = (stamps[-1] - stamps[0]) * 1e3
    if per_iter_out is not None:
        per_iter_out.extend(per_iter)
    return perf_record(per_iter, total, warmup_iters, groups, PKB_L2_BYTES, tensor_bytes)


# --- profile -----------------------------------------------------------------------------------

def profile_record(fn: Callable[..., Any], args: tuple[Any, ...], dev: torch.device,
                   iters: int, trace_path: Path | None = None) -> dict[str, Any]:
    """What ran in ``iters`` calls of ``fn``, per call (the fields after ``solution`` in
    rank_<r>_profile.json); a profiler failure gives ``error`` and empty lists. With
    ``trace_path`` the profiler's Kineto trace is kept there (bounded, see TRACE_MAX_BYTES)."""
    cuda = dev.type == "cuda"
    head: dict[str, Any] = {"device": dev.type, "iterations": iters,
                            "torch_version": torch.__version__, "nccl_version": nccl_version(cuda)}
    empty: dict[str, Any] = {"kernels": [], "nccl_kernels": [], "memcpy": [], "memset": [],
                             "runtime": [], "collectives": []}
    try:
        prof, call_us = profiled_run(fn, args, cuda, iters)
        out = {**head, **summarize_events(list(prof.events()), iters), "call_event_us": call_us}
    except Exception as exc:  # the run's result stands without its profile
        traceback.print_exc()
        return {**head, **empty, "error": one_line(f"{type(exc).__name__}: {exc}")}
    if trace_path is not None:
        out.update(keep_trace(prof, trace_path))
    return out


def keep_trace(prof: Any, path: Path) -> dict[str, Any]:
    """Export the Kineto trace to ``path`` (.json.gz); drop it past TRACE_MAX_BYTES."""
    try:
        prof.export_chrome_trace(str(path))
    except Exception as exc:  # the profile stands without its trace
        return {"trace_file": None, "trace_error": one_line(f"{type(exc).__name__}: {exc}")}
    size = path.stat().st_size
    if size > TRACE_MAX_BYTES:
        path.unlink()
        return {"trace_file": None, "trace_error": f"trace of {size} B compressed exceeds "
                f"{TRACE_MAX_BYTES} B (TRACE_MAX_BYTES); profile fewer calls"}
    return {"trace_file": path.name, "trace_bytes": size}


def profiled_run(fn: Callable[..., Any], args: tuple[Any, ...], cuda: bool, iters: int
                 ) -> tuple[Any, list[float] | None]:
    """The profiler over ``iters`` calls, after one untimed call, each call a ProfilerStep
    annotation between two CUDA events; and each call's time between its events (µs)."""
    from torch.profiler import ProfilerActivity, profile, record_function

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    fn(*args)
    sync()
    if dist.is_initialized():  # every rank starts profiling together
        dist.barrier()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    marks = [torch.cuda.Event(enable_timing=True) for _ in range(iters + 1)] if cuda else []
    with profile(activities=activities) as prof:
        if cuda:
            marks[0].record()
        for i in range(iters):
            with record_function(STEP_NAME.format(i + 1)):
                fn(*args)
            if cuda:
                marks[i + 1].record()
        sync()
    call_us = ([marks[i].elapsed_time(marks[i + 1]) * 1e3 for i in range(iters)]
               if cuda else None)
    return prof, call_us


def nccl_version(cuda: bool) -> str | None:
    if not cuda:
        return None
    try:
        version = torch.cuda.nccl.version()
    except Exception:  # a build without NCCL
        return None
    return ".".join(map(str, version)) if isinstance(version, tuple) else str(version)


def profiled_events(fn: Callable[..., Any], args: tuple[Any, ...], cuda: bool, iters: int
                    ) -> list[Any]:
    """The profiler's events of ``iters`` calls, after one untimed call."""
    return list(profiled_run(fn, args, cuda, iters)[0].events())


def event_kind(event: Any) -> str | None:
    """``kernel``, ``memcpy``, ``memset``, ``runtime``, ``collective`` or None (not recorded)
    for one event.
    A device event is told by the profiler's activity type where it is one of DEVICE_KINDS,
    left out where it is an annotation or a sync (``nccl:all_reduce`` is the annotation around
    the NCCL kernel, not a kernel), and told by its name otherwise."""
    from torch.profiler import DeviceType

    name = str(event.name)
    if event.device_type == DeviceType.CPU:
        if name.startswith(RUNTIME_PREFIXES):
            return "runtime"
        return "collective" if name.startswith(COLLECTIVE_PREFIXES) else None
    if event.device_type != DeviceType.CUDA or getattr(event, "is_user_annotation", False):
        return None
    activity = getattr(event, "activity_type", None)
    if activity in DEVICE_KINDS:
        return DEVICE_KINDS[activity]
    if activity in SKIPPED_ACTIVITIES:
        return None
    if name.startswith("Memcpy"):
        return "memcpy"
    return "memset" if name.startswith("Memset") else "kernel"


def memcpy_kind(name: str) -> str:
    """``PtoP`` of "Memcpy PtoP (Device -> Device)"; the name itself when it has no such word."""
    words = name.split()
    return words[1] if len(words) > 1 and words[0] == "Memcpy" else name


def event_bytes(event: Any) -> int | None:
    """Bytes a memcpy or memset moved, where the profiler's event gives them (its extra
    metadata, its structured metadata, or its metadata JSON text); else None."""
    extra = getattr(event, "extra_meta", None)
    value = extra.get("bytes") if isinstance(extra, dict) else None
    if value is None:
        value = getattr(getattr(event, "event_metadata", None), "bytes", None)
    if value is None:
        with warnings.catch_warnings():  # deprecated in newer torch, the only one in older
            warnings.simplefilter("ignore")
            text = getattr(event, "metadata_json", None)
        if isinstance(text, str) and text.strip():
            try:
                meta = json.loads("{" + text.strip().rstrip(",") + "}")
            except ValueError:
                meta = None
            value = meta.get("bytes") if isinstance(meta, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def summarize_events(events: list[Any], iters: int) -> dict[str, Any]:
    """The lists of rank_<r>_profile.json: per name (kind, for memcpys and memsets) the count
    per call, GPU µs per call, and bytes per call where every event of the kind has them."""
    groups: dict[str, dict[str, dict[str, Any]]] = {
        "kernels": {}, "nccl_kernels": {}, "memcpy": {}, "memset": {}, "runtime": {},
        "collectives": {}}
    for event in events:
        kind = event_kind(event)
        if kind is None:
            continue
        name = str(event.name)
        if kind == "kernel":
            where, key = ("nccl_kernels" if "nccl" in name.lower() else "kernels"), name
        elif kind == "memcpy":
            where, key = "memcpy", memcpy_kind(name)
        elif kind == "memset":
            where, key = "memset", "memset"
        else:
            where, key = ("runtime" if kind == "runtime" else "collectives"), name
        entry = groups[where].setdefault(key, {"count": 0, "us": 0.0, "bytes": 0})
        entry["count"] += 1
        entry["us"] += float(event.time_range.end - event.time_range.start)
        if kind in ("memcpy", "memset") and entry["bytes"] is not None:
            moved = event_bytes(event)
            entry["bytes"] = None if moved is None else entry["bytes"] + moved
    out: dict[str, Any] = {}
    for where, entries in groups.items():
        label = "kind" if where in ("memcpy", "memset") else "name"
        rows = []
        for key, entry in sorted(entries.items(), key=lambda kv: (-kv[1]["count"], kv[0])):
            row: dict[str, Any] = {label: key, "per_call": entry["count"] / iters}
            if where not in ("runtime", "collectives"):
                row["gpu_us_per_call"] = entry["us"] / iters
            if where == "memcpy":
                row["bytes_per_call"] = (None if entry["bytes"] is None
                                         else entry["bytes"] / iters)
            rows.append(row)
        out[where] = rows
    return out


# --- the run -----------------------------------------------------------------------------------

def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pkb-root", required=True)
    parser.add_argument("--reference", required=True, help="PKB's reference/<stem>.py")
    parser.add_argument("--problem-id", type=int, required=True)
    parser.add_argument("--solution", help="the candidate (absent: time the reference)")
    parser.add_argument("--logs-dir", required=True)
    parser.add_argument("--status-dir", required=True)
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--rows", type=int, default=1024)
    parser.add_argument("--cols", type=int, default=1024)
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="bfloat16")
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--atol", type=float, default=1e-2)
    parser.add_argument("--rtol", type=float, default=1e-2)
    parser.add_argument("--warmup-iters", type=int, default=500)
    parser.add_argument("--iters", type=int, default=100)
    parser.add_argument("--profile-iters", type=int, default=0,
                        help="calls profiled after timing into rank_<r>_profile.json (0: none)")
    return parser.parse_args(argv)


def setup(device: str) -> tuple[int, int, torch.device]:
    """(rank, world size, this rank's device) with the process group up: nccl or gloo."""
    if "RANK" not in os.environ:
        raise RuntimeError("run under torchrun (RANK and WORLD_SIZE unset)")
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if device == "cpu":
        dist.init_process_group("gloo", rank=rank, world_size=world_size)
        return rank, world_size, torch.device("cpu")
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    # concurrent JIT builds of one extension by several ranks corrupt a shared cache
    base = os.environ.get("TORCH_EXTENSIONS_DIR",
                          os.path.join(os.path.expanduser("~"), ".cache", "torch_extensions"))
    os.environ["TORCH_EXTENSIONS_DIR"] = os.path.join(base, f"pkbsim_rank_{rank}")
    dist.init_process_group("nccl", rank=rank, world_size=world_size, device_id=dev)
    return rank, world_size, dev


def check(reference: Callable[..., Any], candidate: Callable[..., Any],
          make_inputs: Callable[[int], tuple[Any, ...]], args: argparse.Namespace,
          status: Status, world_size: int, dev: torch.device) -> Any:
    """Every trial on every rank; raises WrongOutput at the first trial wrong on any rank.
    Returns the candidate's output on trial 0."""
    first: Any = None
    for trial in range(args.trials):
        status.update(phase=f"check trial {trial + 1}/{args.trials}: reference")
        expected = saved_form(call(reference, make_inputs(trial), dev))
        status.update(phase=f"check trial {trial + 1}/{args.trials}: candidate")
        got = saved_form(call(candidate, make_inputs(trial), dev))
        first = to_cpu(got) if trial == 0 else first  # before a later call reuses buffers
        details: list[str | None] = [None] * world_size
        dist.all_gather_object(details, mismatch(expected, got, args.atol, args.rtol))
        bad = [r for r, detail in enumerate(details) if detail]
        if bad:  # the same message on every rank: the first wrong rank's
            more = f" (wrong on ranks {bad})" if len(bad) > 1 else ""
            raise WrongOutput(f"trial {trial + 1}/{args.trials}, rank {bad[0]}: "
                              f"{details[bad[0]]}{more}")
    return first


def call(fn: Callable[..., Any], inputs: tuple[Any, ...], dev: torch.device) -> Any:
    """One call, finished on this GPU and on every rank (as PKB's worker does)."""
    out = fn(*inputs)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    dist.barrier()
    return out


def input_maker(args: argparse.Namespace, rank: int, world_size: int, dev: torch.device
                ) -> Callable[[int], tuple[Any, ...]]:
    """PKB's inputs for one trial of ``args.problem_id``, from the checkout's utils."""
    sys.path.insert(0, os.path.abspath(args.pkb_root))  # solutions import utils.*
    tensors = load_module(os.path.join(args.pkb_root, "utils", "input_output_tensors.py"),
                          "pkb_input_output_tensors")
    dtype = DTYPES[args.dtype]

    def make_inputs(trial: int) -> tuple[Any, ...]:
        return tuple(tensors.create_input_tensor(rank, world_size, args.problem_id,
                                                 (args.rows, args.cols), dtype, trial=trial,
                                                 device=dev))
    return make_inputs


def run(args: argparse.Namespace, status: Status, rank: int, world_size: int,
        dev: torch.device) -> list[float]:
    """Check (or run the reference once), save the outputs, time; the timed iterations in ms."""
    status.update(phase="load")
    make_inputs = input_maker(args, rank, world_size, dev)

    reference = solution_of(args.reference, "pkb_reference")
    if args.solution:
        candidate = solution_of(args.solution, "pkb_candidate")
        output = check(reference, candidate, make_inputs, args, status, world_size, dev)
    else:
        candidate = reference
        status.update(phase="reference run")
        output = saved_form(call(reference, make_inputs(0), dev))
    logs = Path(args.logs_dir)
    logs.mkdir(parents=True, exist_ok=True)
    torch.save(to_cpu(output), logs / f"rank_{rank}.pt")
    dist.barrier()  # as PKB's worker, between saving the outputs and timing
    status.update(phase="timing")
    per_iter: list[float] = []
    record = time_solution(candidate, make_inputs(0), dev.type == "cuda", args.warmup_iters,
                           args.iters, per_iter)
    (logs / f"rank_{rank}_perf.json").write_text(json.dumps(record, indent=2))
    if args.profile_iters > 0:
        status.update(phase="profile")
        profile = profile_record(candidate, make_inputs(0), dev, args.profile_iters,
                                 logs / f"rank_{rank}_trace.json.gz")
        profile = {"schema": PROFILE_SCHEMA, "rank": rank, "world_size": world_size,
                   "variant": status.state["variant"], "solution": args.solution, **profile}
        (logs / f"rank_{rank}_profile.json").write_text(json.dumps(profile, indent=1))
    status.update(phase="finish")
    dist.barrier()
    return per_iter


def one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= ERROR_CHARS else text[:ERROR_CHARS - 3] + "..."


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    variant = "candidate" if args.solution else "reference"
    rank = int(os.environ.get("RANK", "0"))
    status = Status(args.status_dir, rank, int(os.environ.get("WORLD_SIZE", "1")), variant)
    status.update(phase="init")
    try:
        rank, world_size, dev = setup(args.device)
        run(args, status, rank, world_size, dev)
    except WrongOutput as exc:
        status.update(status="wrong", error=one_line(str(exc)))
        print(f"pkb_run: wrong output: {one_line(str(exc))}", file=sys.stderr, flush=True)
        return EXIT_WRONG
    except Exception as exc:
        traceback.print_exc()
        phase = status.state["phase"]
        error = one_line(f"{type(exc).__name__}: {exc}")
        status.update(status="crash", error=f"rank {rank} in {phase}: {error}")
        print(f"pkb_run: crash on rank {rank} in {phase}: {error}", file=sys.stderr, flush=True)
        return EXIT_CRASH
    status.update(status="ok", phase="done")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
