"""NCCL's collectives through torch.distributed, timed and checked like nccl-tests.

Run by torchrun, one process per GPU (``pkbsim validate`` does this for the nccl.* cases):

    python -m torch.distributed.run --standalone --nproc-per-node 2 \\
        validate/nccl_collectives.py --case nccl.collectives --out PATH [--quick]

Collectives: all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all, gather,
scatter (nccl-tests' eight) and send_recv (a ring: each rank sends to rank + 1 and receives from
rank - 1 in one batch_isend_irecv). Sizes 1 KiB to 1 GiB by x2 (--quick: x8 up to 256 MiB).
size_bytes is nccl-tests' S: the buffer for all_reduce, broadcast and reduce; n x shard for
all_gather, reduce_scatter, gather and scatter; each rank's input for all_to_all; the message
for send_recv. algbw = S / t and busbw = algbw x factor(n), nccl-tests' factors
(doc/PERFORMANCE.md; the same as pkbsim.collectives.bandwidth, which a test checks).

At each size: the inputs are filled with rank-dependent non-zero values ((rank + 1) x
(1 + index mod 7), float32, exact), the outputs poisoned with NaN, one call checked against its
closed form on every rank (a wrong result ends the run: exit 1 with one line); then warm-up
calls, and ``repeats`` timings of K back-to-back calls between CUDA events (gloo on CPU:
perf_counter), a barrier before each. A repeat's time per call is the slowest rank's; the
median of the repeats is reported. Only global rank 0 writes lines to --out:
``{"measurement": {"op": "nccl_collective", ...}}`` and ``{"data": {...}}``.

NVLink multicast stays off (NCCL_NVLS_ENABLE=0 and friends, unless already set) except for the
nccl.nvls case. This script never imports pkbsim.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

NO_MULTICAST = (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
                ("NVSHMEM_DISABLE_NVLS", "1"))
MULTICAST_CASE = "nccl.nvls"


def _multicast_off(argv: list[str]) -> None:
    case = argv[argv.index("--case") + 1] if "--case" in argv[:-1] else None
    if case != MULTICAST_CASE:
        for key, value in NO_MULTICAST:
            os.environ.setdefault(key, value)


if __name__ == "__main__":
    _multicast_off(sys.argv[1:])

import torch  # noqa: E402  (after the environment is set)
import torch.distributed as dist  # noqa: E402

KiB, MiB, GiB = 1024, 1024**2, 1024**3
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce",
               "all_to_all", "gather", "scatter", "send_recv")
# nccl-tests' bus bandwidth factors, n ranks
BUSBW_FACTOR: dict[str, Callable[[int], float]] = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "gather": lambda n: (n - 1) / n,
    "scatter": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "send_recv": lambda n: 1.0,
}
# element counts split into n equal shards
SHARDED = ("all_gather", "reduce_scatter", "all_to_all", "gather", "scatter")
DTYPE = torch.float32
# torch 2.13 renamed the one-tensor forms (*_single); older releases have only the old names
ALL_GATHER = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
REDUCE_SCATTER = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
ROOT = 0


def sizes(min_bytes: int, max_bytes: int, quick: bool) -> list[int]:
    step = 8 if quick else 2
    out, size = [], min_bytes
    while size <= max_bytes:
        out.append(size)
        size *= step
    return out


def count_for(collective: str, size_bytes: int, n: int) -> int:
    """Elements of S: rounded down to a multiple of n where the buffer is split in shards."""
    count = size_bytes // DTYPE.itemsize
    return count - count % n if collective in SHARDED else count


def pattern(rank: int, start: int, length: int, device: torch.device) -> torch.Tensor:
    """(rank + 1) x (1 + j mod 7) for j in [start, start + length): never zero, exact."""
    j = torch.arange(start, start + length, dtype=torch.int32, device=device)
    return ((rank + 1) * (1 + j % 7)).to(DTYPE)


def poison(count: int, device: torch.device) -> torch.Tensor:
    return torch.full((count,), float("nan"), dtype=DTYPE, device=device)


def buffers(collective: str, count: int, rank: int, n: int, device: torch.device
            ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(input, output) filled for the check; output None where the call works in place."""
    shard = count // n if collective in SHARDED else count
    if collective in ("all_reduce", "reduce"):
        return pattern(rank, 0, count, device), None
    if collective == "broadcast":
        return (pattern(ROOT, 0, count, device) if rank == ROOT else poison(count, device)), None
    if collective in ("all_gather", "gather"):
        return pattern(rank, 0, shard, device), poison(count, device)
    if collective == "scatter":
        return pattern(rank, 0, count, device), poison(shard, device)
    if collective == "reduce_scatter":
        return pattern(rank, 0, count, device), poison(shard, device)
    # all_to_all, send_recv
    return pattern(rank, 0, count, device), poison(count, device)


def expected(collective: str, count: int, rank: int, n: int, device: torch.device
             ) -> torch.Tensor | None:
    """The closed form of the result on ``rank``; None where that rank receives nothing."""
    total = n * (n + 1) // 2  # sum over ranks of (rank + 1)
    shard = count // n if collective in SHARDED else count
    if collective == "all_reduce":
        return pattern(0, 0, count, device) * total
    if collective == "reduce":
        return pattern(0, 0, count, device) * total if rank == ROOT else None
    if collective == "broadcast":
        return pattern(ROOT, 0, count, device)
    if collective == "all_gather" or (collective == "gather" and rank == ROOT):
        return torch.cat([pattern(r, 0, shard, device) for r in range(n)])
    if collective == "gather":
        return None
    if collective == "reduce_scatter":
        return pattern(0, rank * shard, shard, device) * total
    if collective == "all_to_all":
        return torch.cat([pattern(r, rank * shard, shard, device) for r in range(n)])
    if collective == "scatter":
        return pattern(ROOT, rank * shard, shard, device)
    if collective == "send_recv":
        return pattern((rank - 1) % n, 0, count, device)
    raise ValueError(f"unknown collective {collective!r}")


def call(collective: str, inp: torch.Tensor, out: torch.Tensor | None, rank: int, n: int
         ) -> Callable[[], None]:
    """One call of ``collective`` on these buffers, its arguments built once."""
    if collective == "all_reduce":
        return lambda: dist.all_reduce(inp)
    if collective == "broadcast":
        return lambda: dist.broadcast(inp, src=ROOT)
    if collective == "reduce":
        return lambda: dist.reduce(inp, dst=ROOT)
    assert out is not None
    if collective == "all_gather":
        return lambda: ALL_GATHER(out, inp)
    if collective == "reduce_scatter":
        return lambda: REDUCE_SCATTER(out, inp)
    if collective == "all_to_all":
        return lambda: dist.all_to_all_single(out, inp)
    if collective == "gather":
        parts = list(out.chunk(n)) if rank == ROOT else None
        return lambda: dist.gather(inp, parts, dst=ROOT)
    if collective == "scatter":
        chunks = list(inp.chunk(n)) if rank == ROOT else None
        return lambda: dist.scatter(out, chunks, src=ROOT)
    if collective == "send_recv":
        ops = [dist.P2POp(dist.isend, inp, (rank + 1) % n),
               dist.P2POp(dist.irecv, out, (rank - 1) % n)]

        def ring() -> None:
            for work in dist.batch_isend_irecv(ops):
                work.wait()

        return ring
    raise ValueError(f"unknown collective {collective!r}")


def mismatch(got: torch.Tensor, want: torch.Tensor) -> str | None:
    """None when equal (NaN never is); else the first differing element."""
    if got.shape != want.shape:
        return f"shape {tuple(got.shape)}, expected {tuple(want.shape)}"
    if torch.equal(got, want):
        return None
    index = int((got != want).nonzero()[0, 0])
    return f"element {index} is {float(got[index])}, expected {float(want[index])}"


def busbw_GBps(collective: str, size_bytes: int, n: int, time_us: float) -> tuple[float, float]:
    """(algbw, busbw) in GB/s: S / t and S / t x factor(n)."""
    algbw = size_bytes / (time_us * 1e-6) / 1e9
    return algbw, algbw * BUSBW_FACTOR[collective](n)


class Timer:
    """Seconds per call of ``fn`` over ``calls`` back-to-back calls, after a barrier."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"

    def __call__(self, fn: Callable[[], None], calls: int) -> float:
        dist.barrier()
        if self.cuda:
            torch.cuda.synchronize()
            start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
            start.record()
            for _ in range(calls):
                fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) * 1e-3 / calls
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        return (time.perf_counter() - t0) / calls


def calls_for(size_bytes: int) -> int:
    """Back-to-back calls per timing: 20 for small sizes, fewer for large."""
    return 20 if size_bytes <= 16 * MiB else 10 if size_bytes <= 128 * MiB else 4


class Output:
    """Lines to --out, written by global rank 0 only, each flushed as soon as it exists."""

    def __init__(self, path: str, rank: int) -> None:
        self.path, self.write = path, rank == 0

    def line(self, obj: dict[str, Any]) -> None:
        if self.write:
            with open(self.path, "a") as handle:
                handle.write(json.dumps(obj) + "\n")
                handle.flush()
                os.fsync(handle.fileno())


def agree_ok(ok: bool, device: torch.device) -> bool:
    """True when every rank's check passed."""
    bad = torch.tensor([0 if ok else 1], dtype=torch.int32, device=device)
    dist.all_reduce(bad)
    return int(bad.item()) == 0


def slowest(times_s: list[float], device: torch.device) -> list[float]:
    """Per repeat, the slowest rank's time."""
    t = torch.tensor(times_s, dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return [float(v) for v in t.tolist()]


def measure(collective: str, size_bytes: int, args: argparse.Namespace, rank: int, n: int,
            device: torch.device, timer: Timer, backend: str) -> dict[str, Any] | None:
    """Check one call, then time it; the measurement line (rank 0's view), or None when this
    backend lacks the collective."""
    count = count_for(collective, size_bytes, n)
    if count < n or count == 0:
        return None
    inp, out = buffers(collective, count, rank, n, device)
    fn = call(collective, inp, out, rank, n)
    try:
        fn()
    except (RuntimeError, NotImplementedError) as exc:
        if backend == "gloo" and "support" in str(exc).lower():
            raise Unsupported(" ".join(str(exc).split())[:160]) from None
        raise
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    want = expected(collective, count, rank, n, device)
    problem = mismatch(out if out is not None else inp, want) if want is not None else None
    if problem:
        print(f"nccl_collectives: {collective} at {count * DTYPE.itemsize} B: wrong result on "
              f"rank {rank}: {problem}", file=sys.stderr, flush=True)
    if not agree_ok(problem is None, device):
        raise SystemExit(1)
    for _ in range(args.warmup):
        fn()
    calls = calls_for(size_bytes)
    times_s = slowest([timer(fn, calls) for _ in range(args.repeats)], device)
    times_us = sorted(t * 1e6 for t in times_s)
    time_us = statistics.median(times_us)
    actual = count * DTYPE.itemsize
    algbw, busbw = busbw_GBps(collective, actual, n, time_us)
    return {"op": "nccl_collective", "size_bytes": actual, "time_us": time_us,
            "bandwidth_GBps": algbw, "repeats": len(times_us), "min_us": times_us[0],
            "max_us": times_us[-1],
            "params": {"collective": collective, "world_size": n, "algbw_GBps": algbw,
                       "busbw_GBps": busbw, "nccl_algo": os.environ.get("NCCL_ALGO"),
                       "nccl_proto": os.environ.get("NCCL_PROTO"), "dtype": "float32",
                       "backend": backend, "calls": calls}}


class Unsupported(Exception):
    """The backend lacks this collective (gloo)."""


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--case", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--collectives", default=",".join(COLLECTIVES),
                        help="comma-separated subset of: " + ", ".join(COLLECTIVES))
    parser.add_argument("--backend", choices=("auto", "nccl", "gloo"), default="auto")
    parser.add_argument("--min-bytes", type=int, default=1 * KiB)
    parser.add_argument("--max-bytes", type=int, default=None,
                        help="default 1 GiB (--quick: 256 MiB)")
    args = parser.parse_args(argv)
    args.collectives = [c.strip() for c in args.collectives.split(",") if c.strip()]
    unknown = [c for c in args.collectives if c not in COLLECTIVES]
    if unknown or not args.collectives:
        parser.error(f"--collectives: unknown {', '.join(unknown) or '(empty)'}; "
                     f"expected some of {', '.join(COLLECTIVES)}")
    if args.max_bytes is None:
        args.max_bytes = 256 * MiB if args.quick else 1 * GiB
    if not 0 < args.min_bytes <= args.max_bytes:
        parser.error("expected 0 < --min-bytes <= --max-bytes")
    args.warmup = 2 if args.quick else 5
    args.repeats = 5 if args.quick else 10
    return args


def _single_process_defaults() -> None:
    """Outside torchrun: a world of one."""
    if "RANK" in os.environ:
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for key, value in (("RANK", "0"), ("WORLD_SIZE", "1"), ("LOCAL_RANK", "0"),
                       ("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", str(port))):
        os.environ.setdefault(key, value)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    _single_process_defaults()
    backend = args.backend
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        if not torch.cuda.is_available():
            raise SystemExit("nccl_collectives: --backend nccl needs CUDA; none is available")
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    rank, n = dist.get_rank(), dist.get_world_size()
    out = Output(args.out, rank)
    nccl = torch.cuda.nccl.version() if backend == "nccl" else None
    out.line({"data": {"backend": backend, "world_size": n, "torch": torch.__version__,
                       "nccl": ".".join(map(str, nccl)) if nccl else None,
                       "nccl_algo": os.environ.get("NCCL_ALGO"),
                       "nccl_proto": os.environ.get("NCCL_PROTO"),
                       "nvls_enable": os.environ.get("NCCL_NVLS_ENABLE")}})
    timer = Timer(device)
    skipped: dict[str, str] = {}
    checked: list[str] = []
    for collective in args.collectives:
        if collective == "send_recv" and n < 2:
            skipped[collective] = "needs 2 ranks"
            continue
        try:
            for size in sizes(args.min_bytes, args.max_bytes, args.quick):
                line = measure(collective, size, args, rank, n, device, timer, backend)
                if line is not None:
                    out.line({"measurement": line})
        except Unsupported as exc:
            skipped[collective] = str(exc)
            continue
        checked.append(collective)
    out.line({"data": {"skipped": sorted(skipped), "skip_reasons": skipped,
                       "checked": checked}})
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
