"""Host-side costs of driving a GPU from Python: what the simulator's host timeline needs.

Run on a machine with one or more NVIDIA GPUs (torch with CUDA), as a child process:

    python validate/host_dispatch.py --out results.json

Measures, each as the median of several repeats after warm-up:
  * eager_op: host time to issue one small eager PyTorch op (``torch.add(x, 1, out=y)`` on
    1024 elements) in a Python loop, and the GPU time per op of the same loop (CUDA events);
  * graph_node: GPU time per kernel node when the same ops are replayed in a CUDA graph;
  * dist_<kind>: host time per eager torch.distributed call (NCCL, this process alone:
    world size 1) in a Python loop, and its GPU time per call;
  * item_sync: wall time of ``.item()`` on a one-element tensor when the stream is idle, and of
    ``torch.cuda.synchronize()`` on an idle device: the cost of a host synchronisation beyond
    the GPU work it waits for.
NVLink multicast stays off (NCCL_NVLS_ENABLE=0 and friends are set before torch starts).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

for _key, _value in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
                     ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ.setdefault(_key, _value)


def _median_us(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6


def _loop(fn, n: int, torch) -> tuple[float, float]:
    """(host seconds per call, GPU seconds per call) for ``n`` calls of ``fn`` in a loop."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    end.record()
    torch.cuda.synchronize()
    return (t1 - t0) / n, start.elapsed_time(end) * 1e-3 / n


def measure(repeats: int, n: int) -> dict[str, object]:
    import torch
    import torch.distributed as dist

    dev = torch.device("cuda", 0)
    x = torch.ones(1024, device=dev)
    y = torch.empty_like(x)
    out: dict[str, object] = {}

    def op() -> None:
        torch.add(x, 1, out=y)

    for _ in range(3):
        _loop(op, n, torch)
    host, gpu = zip(*(_loop(op, n, torch) for _ in range(repeats)), strict=True)
    out["eager_op"] = {"host_us": _median_us(list(host)), "gpu_us": _median_us(list(gpu)),
                       "calls": n, "repeats": repeats}
    if not torch.allclose(y, x + 1):
        raise SystemExit("eager_op: wrong result")

    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            op()
    torch.cuda.current_stream().wait_stream(stream)
    with torch.cuda.graph(graph):
        for _ in range(n):
            op()
    graph.replay()
    torch.cuda.synchronize()
    per_node = []
    for _ in range(repeats):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        graph.replay()
        e.record()
        torch.cuda.synchronize()
        per_node.append(s.elapsed_time(e) * 1e-3 / n)
    out["graph_node"] = {"gpu_us": _median_us(per_node), "nodes": n, "repeats": repeats}

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29555")
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=dev)
    small = torch.ones(1024, device=dev, dtype=torch.bfloat16)
    gathered = torch.empty(1024, device=dev, dtype=torch.bfloat16)
    calls = {
        "all_reduce": lambda: dist.all_reduce(small),
        "all_gather_into_tensor": lambda: dist.all_gather_into_tensor(gathered, small),
        "all_to_all_single": lambda: dist.all_to_all_single(gathered, small),
        "broadcast": lambda: dist.broadcast(small, 0),
    }
    for name, fn in calls.items():
        for _ in range(2):
            _loop(fn, n // 4, torch)
        host, gpu = zip(*(_loop(fn, n // 4, torch) for _ in range(repeats)), strict=True)
        out[f"dist_{name}"] = {"host_us": _median_us(list(host)),
                               "gpu_us": _median_us(list(gpu)), "calls": n // 4,
                               "repeats": repeats, "world_size": 1}
    dist.destroy_process_group()

    one = torch.ones(1, device=dev)
    item, sync = [], []
    for _ in range(repeats * 20):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        one.item()
        item.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        torch.cuda.synchronize()
        sync.append(time.perf_counter() - t0)
    out["item_sync"] = {"item_us": _median_us(item), "synchronize_us": _median_us(sync),
                        "repeats": repeats * 20}
    out["environment"] = {
        "gpu_name": torch.cuda.get_device_name(0), "gpu_count": torch.cuda.device_count(),
        "torch": torch.__version__, "cuda": torch.version.cuda,
        "nccl": ".".join(map(str, torch.cuda.nccl.version())),
        "python": platform.python_version(), "hostname": platform.node(),
        "cpu": platform.processor() or platform.machine(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "command": " ".join(sys.argv),
    }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    result = measure(args.repeats, args.calls)
    with open(args.out, "w") as handle:
        json.dump(result, handle, indent=2)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
