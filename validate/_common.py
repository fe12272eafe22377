"""Shared by the GPU scripts of validate/: arguments, safe environment, output lines, timing.

Each script runs as a child process of ``pkbsim validate`` (never imported by pkbsim):

    python validate/<script>.py --case KEY --out PATH [--quick]

and appends one JSON line per result to PATH: ``{"measurement": {...}}`` (fields of
pkbsim.validation.results.Measurement) or ``{"data": {...}}``. Exit code 0 means every check
passed. Timing follows validate/README.md: warm-up, CUDA events, the median of many, buffers
rotated through a pool several times the L2, inputs never zero, outputs poisoned and checked.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from collections.abc import Callable
from typing import Any

# NVLink multicast stays off unless the runner says otherwise (it can disrupt a shared node).
for _key, _value in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
                     ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ.setdefault(_key, _value)

KiB, MiB, GiB = 1024, 1024**2, 1024**3


def parse_args(doc: str, extra: Callable[[argparse.ArgumentParser], None] | None = None
               ) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--case", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--quick", action="store_true")
    if extra:
        extra(parser)
    return parser.parse_args()


class CheckFailed(RuntimeError):
    """A kernel or copy produced a wrong result."""


class Emitter:
    """Appends result lines to the --out file as soon as each exists (a crash keeps them)."""

    def __init__(self, path: str, write: bool = True) -> None:
        self.path = path
        self.write = write
        self.count = 0

    def _line(self, obj: dict[str, Any]) -> None:
        if not self.write:
            return
        with open(self.path, "a") as handle:
            handle.write(json.dumps(obj) + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def measurement(self, op: str, size_bytes: int, times_us: list[float], /,
                    **params: Any) -> float:
        """Record the median of ``times_us``; return it."""
        if not times_us or min(times_us) <= 0:
            raise CheckFailed(f"{op} {size_bytes} B: no positive timing ({times_us[:3]})")
        ordered = sorted(times_us)
        median = statistics.median(ordered)
        bw = size_bytes / (median * 1e-6) / 1e9 if size_bytes else None
        self._line({"measurement": {
            "op": op, "size_bytes": int(size_bytes), "time_us": median, "bandwidth_GBps": bw,
            "repeats": len(ordered), "min_us": ordered[0], "max_us": ordered[-1],
            "params": params}})
        self.count += 1
        shown = f" {bw:9.1f} GB/s" if bw else ""
        extra = " ".join(f"{k}={v}" for k, v in params.items() if not isinstance(v, float))
        print(f"{op:22s} {size_bytes:>12d} B {median:12.3f} us{shown} {extra}", flush=True)
        return median

    def data(self, **items: Any) -> None:
        self._line({"data": items})


def sizes(lo: int, hi: int, factor: int) -> list[int]:
    out, n = [], lo
    while n <= hi:
        out.append(n)
        n *= factor
    return out


def repeats_for(size_bytes: int, quick: bool) -> int:
    """More repeats for short operations (their timings scatter more)."""
    if size_bytes >= 256 * MiB:
        n = 10
    elif size_bytes >= 16 * MiB:
        n = 20
    else:
        n = 50
    return max(5, n // 3) if quick else n


def batch_for(size_bytes: int) -> int:
    """Ops per timed sample: small ops back to back (a stream's steady cost per op), large ones
    alone (launch costs vanish in them)."""
    if size_bytes <= 1 * MiB:
        return 32
    if size_bytes <= 16 * MiB:
        return 8
    return 1


def run_main(main: Callable[[], None]) -> None:
    """Run a script's ``main``; a failed check ends it with one line and exit code 1."""
    try:
        main()
    except CheckFailed as exc:
        raise SystemExit(f"check failed: {exc}") from None


# ----------------------------------------------------------------------------- CuPy side

SPIN_SRC = r"""
extern "C" __global__ void spin(unsigned long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}
extern "C" __global__ void empty() {}
"""

COPY_SRC = r"""
// Grid-stride copy with 16-byte accesses, four loads in flight per thread.
extern "C" __global__ void copy16(const uint4* __restrict__ src, uint4* __restrict__ dst,
                                  unsigned long long n16) {
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (; i + 3 * stride < n16; i += 4 * stride) {
        uint4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
        dst[i] = a; dst[i + stride] = b; dst[i + 2 * stride] = c; dst[i + 3 * stride] = d;
    }
    for (; i < n16; i += stride) dst[i] = src[i];
}
"""


class Gpu:
    """One device through CuPy: modules, a stream, a spin kernel that hides host issue time,
    and event timing."""

    def __init__(self, device: int = 0) -> None:
        import cupy as cp

        self.cp = cp
        self.device = device
        self.dev = cp.cuda.Device(device)
        self.dev.use()
        props = cp.cuda.runtime.getDeviceProperties(device)
        self.name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        self.sm_count = int(props["multiProcessorCount"])
        self.l2_bytes = int(props["l2CacheSize"])
        self.stream = cp.cuda.Stream(non_blocking=True)
        mod = cp.RawModule(code=SPIN_SRC)
        self._spin = mod.get_function("spin")
        self.empty = mod.get_function("empty")
        self.copy16 = cp.RawModule(code=COPY_SRC).get_function("copy16")

    def spin(self, us: float, stream: Any = None) -> None:
        self._spin((1,), (1,), (self.cp.uint64(int(us * 1000)),),
                   stream=stream or self.stream)

    def event(self) -> Any:
        return self.cp.cuda.Event()

    def time_op(self, op: Callable[[int], None], repeats: int, batch: int = 1,
                warmup: int = 3) -> list[float]:
        """GPU microseconds per ``op(i)`` (i: a new slot each call): each sample times ``batch``
        calls back to back with events and divides, as a stream of such ops runs. A spin
        kernel ahead of the start event keeps the GPU busy while the host enqueues, so the
        time is the GPU's, not the host's issue time."""
        for i in range(warmup):
            op(i)
        self.stream.synchronize()
        out = []
        spin_us = 100.0 + 20.0 * batch
        k = warmup
        for _ in range(repeats):
            start, end = self.event(), self.event()
            self.spin(spin_us)
            start.record(self.stream)
            for _ in range(batch):
                op(k)
                k += 1
            end.record(self.stream)
            end.synchronize()
            out.append(self.cp.cuda.get_elapsed_time(start, end) * 1e3 / batch)
        self.check_error()
        return out

    def check_error(self) -> None:
        self.cp.cuda.runtime.deviceSynchronize()  # raises CUDARuntimeError on a sticky error

    def pool(self, nbytes: int, seed: int) -> Any:
        """A device byte buffer filled with random non-zero bytes."""
        cp = self.cp
        rng = cp.random.default_rng(seed)
        buf = rng.integers(1, 256, size=nbytes, dtype=cp.uint8)
        return buf


def pool_bytes(size_bytes: int, l2_bytes: int) -> int:
    """Rotate copies through a pool at least 4 x L2 (and two sizes) so no repeat hits L2."""
    return max(4 * l2_bytes, 2 * size_bytes)


def offset(i: int, size_bytes: int, pool: int) -> int:
    """The i-th slot of ``size_bytes`` in a ``pool``-byte buffer (256-byte aligned)."""
    slots = max(pool // size_bytes, 1)
    return (i % slots) * size_bytes
