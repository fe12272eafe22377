"""PKB's references at W = 1, each in a fresh process, timed by PKB's harness: the real programs
that `pkbsim calibrate` learns host costs from.

    python validate/pkb_programs.py --case pkb.references --out PATH [--quick]
        [--pkb-root PKB] [--sizes 1024x1024,4096x1024] [--reps 2] [--only 1,2] [--skip 62,64,78]
        [--deadline-s 420 ($PKB_PROGRAMS_DEADLINE_S)] [--problem-timeout-s 90]
        [--grpo-seqs 1024,2048,4096,8192,16384]

PKB (togethercomputer/ParallelKernelBench; --pkb-root or $PKB_ROOT, default .dev/pkb) runs each
problem in a fresh torchrun process. Here a parent that has imported torch (and touched no
GPU) forks one child per problem and repetition: the child starts CUDA, NCCL (one rank) and
PKB's inputs afresh, as a new process would, without paying the interpreter's start and
torch's import again. In the child, for each size (PKB's --m x --n): PKB's inputs
(utils/input_output_tensors.py), one call, then PKB's timing (validate/pkb_run.py: L2-rotating
input groups, 500 warm-up and 100 timed calls between CUDA events; PKB's wall_time_ms is their
mean), then the host's issue time (20 calls without synchronising, then one synchronisation).
Each repetition walks every problem (62, 64 and 78 are left out by default: 55-242 ms a call,
PKB's 600 calls take minutes); a repetition not finished by --deadline-s stops there.

GRPO at the blog's sizes (--grpo-seqs): PKB's problem 83 at one rank, batch 1, vocabulary
32,000, top-k 10, top-p 0.9, chunk = seq / 4 (benchmarks/traces/grpo_blog.py's inputs), each
sequence length in a fresh child, 20 warm-up and 30 timed calls (milliseconds a call, device-bound).

One ``pkb_reference`` measurement per problem, size and repetition: ``time_us`` PKB's mean,
``size_bytes`` the timed tensor's bytes; params problem, rows, cols, rep, median_us, p25_us,
p75_us, host_issue_us, input_groups; ``grpo_blog`` likewise with params seq, vocab, rep.
A problem that raises or outlives --problem-timeout-s is a ``data`` line with its error.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import _common  # noqa: E402

ISSUE_CALLS = 20
GRPO_REFERENCE = "reference/83_vocab_parallel_log_prob_topk_chunked.py"


def extra(parser: Any) -> None:
    parser.add_argument("--pkb-root", default=os.environ.get("PKB_ROOT", ".dev/pkb"))
    parser.add_argument("--sizes", default="1024x1024,4096x1024")
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--only", default="")
    parser.add_argument("--skip", default="62,64,78")
    parser.add_argument("--deadline-s", type=float,
                        default=float(os.environ.get("PKB_PROGRAMS_DEADLINE_S", "420")))
    parser.add_argument("--problem-timeout-s", type=float, default=90.0)
    parser.add_argument("--grpo-seqs", default="1024,2048,4096,8192,16384")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")


def ids(text: str) -> set[int]:
    return {int(x) for x in text.split(",") if x.strip()}


def host_issue_us(fn: Any, args: tuple[Any, ...], cuda: bool) -> float:
    """Host time to issue one call: ISSUE_CALLS calls without synchronising, over their count."""
    import torch

    if cuda:
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(ISSUE_CALLS):
        fn(*args)
    issued = time.perf_counter()
    if cuda:
        torch.cuda.synchronize()
    return (issued - start) / ISSUE_CALLS * 1e6


def timed(fn: Any, args: tuple[Any, ...], cuda: bool, warmup: int, iters: int
          ) -> dict[str, Any]:
    import pkb_run

    per_iter: list[float] = []
    record = pkb_run.time_solution(fn, args, cuda, warmup, iters, per_iter)
    q1, q2, q3 = statistics.quantiles(per_iter, n=4)
    return {"mean_us": record["wall_time_ms"] * 1e3, "median_us": q2 * 1e3, "p25_us": q1 * 1e3,
            "p75_us": q3 * 1e3, "input_groups": int(record["num_input_groups"]),
            "tensor_bytes": int(record["timed_tensor_bytes"]),
            "host_issue_us": host_issue_us(fn, args, cuda)}


def child_problem(opts: Any, pid: int, path: Path, rep: int, port: int) -> list[dict[str, Any]]:
    """In the forked child: one problem at every size."""
    import pkb_run

    os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    rank, world_size, dev = pkb_run.setup(opts.device)
    cuda = dev.type == "cuda"
    fn = pkb_run.solution_of(str(path), "pkb_reference")
    rows_out = []
    for rows, cols in sizes(opts.sizes):
        args = pkb_run.parse_args(["--pkb-root", opts.pkb_root, "--reference", str(path),
                                   "--problem-id", str(pid), "--logs-dir", "/tmp/unused",
                                   "--status-dir", "/tmp/unused", "--device", opts.device,
                                   "--rows", str(rows), "--cols", str(cols)])
        inputs = pkb_run.input_maker(args, rank, world_size, dev)(0)
        pkb_run.call(fn, inputs, dev)
        rows_out.append({"op": "pkb_reference", "problem": path.stem, "rows": rows,
                         "cols": cols, "rep": rep,
                         **timed(fn, inputs, cuda, args.warmup_iters, args.iters)})
    return rows_out


def child_grpo(opts: Any, seq: int, rep: int, port: int) -> list[dict[str, Any]]:
    import pkb_run
    import torch

    os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    _rank, _world, dev = pkb_run.setup(opts.device)
    sys.path.insert(0, os.path.join(ROOT, "benchmarks", "traces"))
    os.environ["PKB_ROOT"] = opts.pkb_root
    import grpo_blog

    torch.manual_seed(0)
    args = tuple(a.to(dev) if isinstance(a, torch.Tensor) else a
                 for a in grpo_blog.make_inputs(0, 1, batch=1, seq=seq, vocab=32000))
    fn = pkb_run.solution_of(os.path.join(opts.pkb_root, GRPO_REFERENCE), "pkb_reference")
    pkb_run.call(fn, args, dev)
    return [{"op": "grpo_blog", "seq": seq, "vocab": 32000, "batch": 1, "rep": rep,
             **timed(fn, args, dev.type == "cuda", 20, 30)}]


def sizes(text: str) -> list[tuple[int, int]]:
    return [(int(a), int(b)) for a, b in (item.split("x") for item in text.split(",") if item)]


def in_child(work: Any, timeout_s: float) -> tuple[list[dict[str, Any]], str | None]:
    """Fork; run ``work()`` in the child; its rows (JSON through a pipe) or its error."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(read_fd)
        code = 0
        try:
            payload = {"rows": work()}
        except BaseException as exc:  # every failure is reported, not raised
            traceback.print_exc()
            payload = {"error": " ".join(f"{type(exc).__name__}: {exc}".split())[:300]}
            code = 1
        with os.fdopen(write_fd, "w") as handle:
            handle.write(json.dumps(payload))
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    os.close(write_fd)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done, _status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(read_fd)
        return [], f"past {timeout_s:g} s"
    with os.fdopen(read_fd) as handle:
        text = handle.read()
    try:
        payload = json.loads(text) if text else {"error": "the child wrote nothing"}
    except ValueError:
        payload = {"error": "the child's output is not JSON"}
    return payload.get("rows", []), payload.get("error")


def main() -> None:
    opts = _common.parse_args(__doc__ or "", extra)
    for key, value in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
                       ("NVSHMEM_DISABLE_NVLS", "1")):
        os.environ.setdefault(key, value)
    import pkb_run  # noqa: F401  (torch and torch.distributed, imported once, before forking)

    root = Path(opts.pkb_root)
    if not (root / "reference").is_dir():
        raise _common.CheckFailed(f"--pkb-root {root}: no reference/ folder (a PKB checkout "
                                  "at commit 3cc0f9b; see docs/validation.md)")
    emit = _common.Emitter(opts.out)
    skip, only = ids(opts.skip), ids(opts.only)
    refs = sorted((int(p.stem.split("_", 1)[0]), p) for p in (root / "reference").glob("*.py")
                  if p.stem.split("_", 1)[0].isdigit())
    refs = [(pid, p) for pid, p in refs
            if pid not in skip and (not only or pid in only)]
    if opts.quick:
        refs, opts.reps = refs[:6], 1
    started = time.monotonic()
    port = 29500
    emit.data(environment_note="fresh process per problem: forked from a parent that imported "
              "torch only", pid=os.getpid(), reps=opts.reps, sizes=opts.sizes)

    def record(rows: list[dict[str, Any]], error: str | None, **what: Any) -> None:
        for row in rows:
            op = row.pop("op")
            mean = row.pop("mean_us")
            nbytes = row.pop("tensor_bytes")
            emit.measurement(op, nbytes, [mean], **row)
        if error:
            label = " ".join(f"{k}={v}" for k, v in what.items())
            emit.data(**{f"error {label}": error})
            print(f"pkb_programs: {what}: {error}", flush=True)

    grpo = [int(s) for s in opts.grpo_seqs.split(",") if s] if not opts.quick else []
    for rep in range(opts.reps):
        for seq in grpo:
            port += 1
            rows, error = in_child(lambda s=seq, r=rep, p=port: child_grpo(opts, s, r, p),
                                   opts.problem_timeout_s)
            record(rows, error, op="grpo_blog", seq=seq, rep=rep)
        for pid, path in refs:
            if time.monotonic() - started > opts.deadline_s:
                emit.data(stopped=f"deadline {opts.deadline_s:g} s", rep=rep, before=path.stem)
                print(f"pkb_programs: deadline: stopped before {path.stem} (rep {rep})",
                      flush=True)
                return
            port += 1
            rows, error = in_child(lambda pid=pid, path=path, r=rep, p=port:
                                   child_problem(opts, pid, path, r, p), opts.problem_timeout_s)
            record(rows, error, op="pkb_reference", problem=path.stem, rep=rep)


if __name__ == "__main__":
    _common.run_main(main)
