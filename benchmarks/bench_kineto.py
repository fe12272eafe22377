"""Speed of reading a user's PyTorch profiler (Kineto) trace: ``pkbsim compare
--measured-trace``. Prints figures and whether the target (a 100 MB trace analysed in under
20 s on this machine) is met; asserts nothing.

The trace is synthetic, written event by event as torch.profiler writes them (Chrome trace
JSON with Kineto's categories), sized to ``--mb`` megabytes: calls of an eager program, each a
``ProfilerStep#<n>`` range holding ATen operators that launch GEMM, elementwise and reduction
kernels, an NCCL all-reduce inside ``c10d::allreduce_``, Python frames (``with_stack``) and a
synchronisation. Two timings, each the median of ``--runs``: the trace read and split in this
process (``load_kineto`` + ``decompose``), and ``pkbsim compare --problem 1 --measured-trace
FILE`` as a new process (start-up, the simulator's model of the reference and the report
included).

Run: python benchmarks/bench_kineto.py [--mb 100] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TARGET_S = 20.0


def call_events(k: int, t0: float, corr: int) -> tuple[list[dict[str, Any]], float, int]:
    """One call's events from ``t0``; its length and the next correlation id."""
    ev: list[dict[str, Any]] = []

    def x(cat: str, name: str, ts: float, dur: float, pid: int = 1, tid: int = 1,
          args: dict[str, Any] | None = None) -> None:
        ev.append({"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid,
                   "ts": round(ts, 3), "dur": round(dur, 3), "args": args or {}})

    x("user_annotation", f"ProfilerStep#{k}", t0, 95)
    x("python_function", "solution.py(40): solution", t0 + 0.5, 94)
    t = t0 + 1
    for op, kernel, gpu_dur in (("aten::mm", "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", 12),
                                ("aten::add", "vectorized_elementwise_kernel", 3),
                                ("aten::sum", "reduce_kernel<512, 1>", 4),
                                ("aten::mul", "vectorized_elementwise_kernel", 3)) * 4:
        x("python_function", f"torch/_tensor.py(10): {op[6:]}", t, 5)
        x("cpu_op", op, t + 0.2, 4.5, args={"External id": corr, "Sequence number": corr})
        x("cuda_runtime", "cudaLaunchKernel", t + 1, 2, args={"correlation": corr})
        x("kernel", kernel, t + 3, gpu_dur, pid=0, tid=7,
          args={"correlation": corr, "stream": 7, "device": 0, "grid": [132, 1, 1],
                "block": [256, 1, 1], "registers per thread": 64})
        ev.append({"ph": "s", "id": corr, "pid": 1, "tid": 1, "ts": t + 1, "cat": "ac2g",
                   "name": "ac2g"})
        ev.append({"ph": "f", "id": corr, "pid": 0, "tid": 7, "ts": t + 3, "cat": "ac2g",
                   "name": "ac2g", "bp": "e"})
        corr += 1
        t += 5
    x("cpu_op", "c10d::allreduce_", t, 10)
    x("cpu_op", "record_param_comms", t + 1, 8)
    x("cuda_runtime", "cudaLaunchKernelExC", t + 3, 3, args={"correlation": corr})
    x("kernel", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", t + 6, 9, pid=0, tid=7,
      args={"correlation": corr, "stream": 7, "device": 0})
    corr += 1
    x("cpu_op", "aten::item", t + 11, 6)
    x("cuda_runtime", "cudaMemcpyAsync", t + 11.5, 1, args={"correlation": corr})
    x("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", t + 16, 1, pid=0, tid=7,
      args={"correlation": corr, "stream": 7, "device": 0, "bytes": 4})
    x("cuda_runtime", "cudaStreamSynchronize", t + 12.5, 5, args={"correlation": corr + 1})
    return ev, 100.0, corr + 2


def write_trace(path: Path, megabytes: float) -> int:
    """A trace of about ``megabytes`` MB at ``path``; the number of calls."""
    target = megabytes * 1e6
    with open(path, "w") as handle:
        handle.write('{"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": 0, '
                     '"world_size": 1}, "traceEvents": [\n')
        written, k, corr, t0, first = 0, 1, 1, 1.0e6, True
        while written < target:
            events, length, corr = call_events(k, t0, corr)
            for e in events:
                text = ("" if first else ",\n") + json.dumps(e)
                first = False
                handle.write(text)
                written += len(text)
            k += 1
            t0 += length
        handle.write("\n]}\n")
    return k - 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=float, default=100.0)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from pkbsim.timeline.breakdown import decompose
    from pkbsim.timeline.kineto import load_kineto

    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "rank_0_trace.json"
        calls = write_trace(trace, args.mb)
        size = trace.stat().st_size
        inproc, cli = [], []
        for _ in range(args.runs):
            t = time.perf_counter()
            result = decompose(load_kineto(trace))
            inproc.append(time.perf_counter() - t)
            t = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-m", "pkbsim", "compare", "--problem", "1",
                 "--measured-trace", str(trace), "--topology",
                 str(ROOT / "docs" / "measurements" / "h100-1gpu.yaml"), "--format", "json",
                 "--out", str(Path(tmp) / "out.json")],
                cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                capture_output=True, text=True, check=False)
            cli.append(time.perf_counter() - t)
            if done.returncode != 0:
                print(done.stderr)
                return 1
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python "
          f"{platform.python_version()}")
    print(f"trace: {size / 1e6:.1f} MB, {calls:,} calls, {len(result.calls):,} split; mean "
          f"call {result.mean.total_us:.1f} us")
    print(f"read + split in-process: median {statistics.median(inproc):.2f} s, slowest "
          f"{max(inproc):.2f} s ({args.runs} runs)")
    print(f"pkbsim compare --measured-trace (new process): median "
          f"{statistics.median(cli):.2f} s, slowest {max(cli):.2f} s")
    met = max(cli) < TARGET_S
    print(f"target: under {TARGET_S:g} s for a 100 MB trace: {'met' if met else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
