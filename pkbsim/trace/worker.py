"""Child entry of ``pkbsim trace``: W ranks on CPU (gloo), each runs the traced function, rank 0
(or ``--rank R``) writes the trace. Started by ``pkbsim.trace.launch`` under a guard with a
time limit; never imported by the analyzer.

    python -m pkbsim.trace.worker --world-size W [--rank R] --port P --out-dir D --timeout-s T \\
        (--pkb-root R --problems 1,13,83 [--rows M --cols N] | --function FILE.py:NAME
         [--inputs NAME] [--set KEY=VALUE ...])

Each target runs twice on every rank: once to warm up (lazy groups, caches: PKB times the
steady state), then under the recorder. Every rank writes ``D/status/<target>.<rank>.json``
when it starts a target (running) and when that fails (error); the recorded rank writes
``D/<target>.json`` and its ok. A rank whose target fails exits 3, and the launcher restarts the
job after that target. With fake tensors one process stands for the recorded rank. The time
limit is the launcher's: it watches the running statuses and kills the job from outside (a
watchdog thread here would wait for a target that holds the interpreter lock).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.util
import inspect
import json
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from pkbsim.files import json_text, write_atomic
from pkbsim.guard import die_with_parent
from pkbsim.trace.format import Trace, trace_to_dict
from pkbsim.trace.recorder import recording

EXIT_FAILED = 3
ERROR_CHARS = 400


def load_module(path: str, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path}: cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def parse_value(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


Target = tuple[str, dict[str, Any], Callable[[], tuple[Callable[..., Any], tuple[Any, ...]]]]


def pkb_targets(args: argparse.Namespace, rank: int, w: int) -> list[Target]:
    root = os.path.abspath(args.pkb_root)
    sys.path.insert(0, root)  # references import utils.*
    tensors = load_module(os.path.join(root, "utils", "input_output_tensors.py"),
                          "pkb_input_output_tensors")
    wanted = {int(x) for x in args.problems.split(",") if x.strip()}
    out: list[Target] = []
    for path in sorted((Path(root) / "reference").glob("*.py"),
                       key=lambda p: int(p.stem.split("_", 1)[0]) if p.stem[0].isdigit() else 0):
        head = path.stem.split("_", 1)[0]
        if not head.isdigit() or (wanted and int(head) not in wanted):
            continue
        pid = int(head)

        def make(path: Path = path, pid: int = pid) -> tuple[Callable[..., Any], tuple[Any, ...]]:
            fn = load_module(str(path), f"pkb_ref_{pid}").solution
            inputs = tuple(tensors.create_input_tensor(rank, w, pid, (args.rows, args.cols),
                                                       torch.bfloat16, trial=0, device="cpu"))
            return fn, inputs
        out.append((path.stem, {"pkb_problem": pid, "rows": args.rows, "cols": args.cols,
                                "dtype": "bf16"}, make))
    return out


def function_target(args: argparse.Namespace, rank: int, w: int) -> list[Target]:
    file, _, name = args.function.rpartition(":")
    sets = dict(item.split("=", 1) for item in args.set)
    params = {k: parse_value(v) for k, v in sets.items()}

    def make() -> tuple[Callable[..., Any], tuple[Any, ...]]:
        module = load_module(file, "pkbsim_traced")
        fn = getattr(module, name, None)
        if not callable(fn):
            raise AttributeError(f"{file} defines no function {name!r}")
        maker = getattr(module, args.inputs, None)
        if not callable(maker):
            raise AttributeError(f"{file} defines no inputs function {args.inputs!r} "
                                 "(make_inputs(rank, world_size, **params) -> tuple of args)")
        accepted = inspect.signature(maker).parameters
        extra = {k: v for k, v in params.items() if k in accepted or any(
            p.kind is p.VAR_KEYWORD for p in accepted.values())}
        unknown = sorted(set(params) - set(extra))
        if unknown:
            raise TypeError(f"{args.inputs} takes no parameter {', '.join(unknown)}")
        inputs = maker(rank, w, **extra)
        return fn, tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    return [(Path(file).stem + "." + name, {"function": args.function, "inputs": args.inputs,
                                            "params": params}, make)]


def status_line(out_dir: Path, rank: int, record: dict[str, Any]) -> None:
    """``D/status/<target>.<rank>.json``: one small file per target and rank."""
    folder = out_dir / "status"
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(folder / f"{record['target']}.{rank}.json", json.dumps(record))


def runs_its_body(result: Any, stem: str) -> None:
    """Refuse a target whose call ran none of its body: a generator function (``yield``), a
    coroutine function or an async generator returns an object that would run it later, so
    its trace would be empty, and wrongly ok."""
    kind = ("a generator function (it contains yield)" if inspect.isgenerator(result) else
            "a coroutine function (async def)" if inspect.iscoroutine(result) else
            "an async generator function" if inspect.isasyncgen(result) else "")
    if not kind:
        return
    with contextlib.suppress(Exception):
        result.close()  # no "never awaited" warning
    raise TypeError(f"{stem} is {kind}: calling it runs none of its body, so there is nothing "
                    "to trace; trace a function that does the work (one that runs the "
                    "generator to its end, or asyncio.run() of the coroutine)")


def rank_main(rank: int, args: argparse.Namespace) -> None:
    die_with_parent(signal.SIGKILL)  # never outlive the guard (or, forked, the job's first process)
    w = args.world_size
    torch.set_num_threads(max(1, args.threads))
    if args.fake:  # one process stands for the recorded rank of W; tensors without storage
        from torch.testing._internal.distributed.fake_pg import FakeStore

        dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=w)
    else:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(args.port))
        dist.init_process_group("gloo", rank=rank, world_size=w,
                                timeout=datetime.timedelta(seconds=args.timeout_s))
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    targets = (pkb_targets if args.pkb_root else function_target)(args, rank, w)
    for stem, meta, make in targets:
        start = time.perf_counter()
        status_line(out_dir, rank, {"target": stem, "status": "running"})
        try:
            with _fake_mode() if args.fake else contextlib.nullcontext(), \
                    recording(enabled=False) as recorder:
                fn, inputs = make()
                with torch.no_grad() if args.no_grad else contextlib.nullcontext():
                    runs_its_body(fn(*inputs), stem)  # warm-up: lazy state, caches
                    _barrier(args)
                    recorder.enabled = True
                    fn(*inputs)
                    recorder.enabled = False
            _barrier(args)
        except BaseException as exc:  # the target's own error, whatever it is
            text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            status_line(out_dir, rank, {"target": stem, "status": "error",
                                        "error": " ".join(text.split())[:ERROR_CHARS],
                                        "seconds": round(time.perf_counter() - start, 3)})
            if args.fake:  # no peer waits for this rank: go on with the next target
                continue
            os._exit(EXIT_FAILED)
        if rank == args.rank:
            info = {"target": stem, "world_size": w, "rank": rank, **meta,
                    "torch": torch.__version__,
                    "mode": "fake" if args.fake else "real",  # as --mode names them
                    "pkb_commit": args.pkb_commit or None}
            trace = Trace(info, tuple(recorder.ops))
            write_atomic(out_dir / f"{stem}.json", json_text(trace_to_dict(trace)))
            status_line(out_dir, rank, {"target": stem, "status": "ok", "ops": len(recorder.ops),
                                     "seconds": round(time.perf_counter() - start, 3)})
    dist.destroy_process_group()


def _fake_mode() -> Any:
    from torch._subclasses.fake_tensor import FakeTensorMode

    return FakeTensorMode()


def _barrier(args: argparse.Namespace) -> None:
    if not args.fake:
        dist.barrier()


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m pkbsim.trace.worker")
    p.add_argument("--world-size", type=int, required=True)
    p.add_argument("--rank", type=int, default=0, help="the rank whose trace is written")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--out-dir", required=True)
    p.add_argument("--timeout-s", type=float, default=120.0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--pkb-root")
    p.add_argument("--pkb-commit", default="")
    p.add_argument("--problems", default="")
    p.add_argument("--rows", type=int, default=1024)
    p.add_argument("--cols", type=int, default=1024)
    p.add_argument("--function")
    p.add_argument("--inputs", default="make_inputs")
    p.add_argument("--set", action="append", default=[])
    p.add_argument("--no-grad", action="store_true")
    p.add_argument("--fake", action="store_true",
                   help="fake tensors and a fake process group: one process, any size")
    return p


def main() -> None:
    die_with_parent(signal.SIGKILL)
    args = parser().parse_args()
    if args.world_size == 1 or args.fake:
        rank_main(args.rank, args)
    else:
        mp.start_processes(  # type: ignore[attr-defined]
            rank_main, args=(args,), nprocs=args.world_size, start_method="fork")


if __name__ == "__main__":
    main()
