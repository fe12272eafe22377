"""Host cost of one eager PyTorch operator per class (pkbsim.trace.classes), on one GPU.

    python validate/host_classes.py --out host_classes.json [--quick]

For each class a few representative operators are issued in a Python loop of N without
synchronising (tensors small, so the GPU keeps up): the host's time per operator is the
loop's wall time over N, the median of R repeats after two warm-up loops. Classes:

  view        x.view, slicing, x.t(), unsqueeze, torch.empty_like (no kernel)
  kernel      torch.add, in-place mul_, torch.cat, sum over a dim, masked_fill, x.float()
  library     torch.mm 64 x 64 bf16, F.linear, conv2d 3x3, torch.fft.rfft
  collective  dist.all_reduce, all_gather_into_tensor, all_to_all_single (NCCL, W = 1)
  sync        .item() and .tolist() of a small tensor (the stream drained first)
  python      a Python loop step calling a no-op function (the interpreter's own cost)

One JSON object comes out: per class the operators' µs and their median, and the environment.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

for _key, _value in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
                     ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ.setdefault(_key, _value)


def per_op_us(fn, n: int, repeats: int, torch, sync_each: bool = False) -> float:
    def loop() -> float:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        return (t1 - t0) * 1e6 / n
    for _ in range(2):
        loop()
    return statistics.median(loop() for _ in range(repeats))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    n, repeats = (200, 5) if args.quick else (1000, 9)
    x = torch.randn(64, 64, device=dev, dtype=torch.bfloat16)
    y = torch.randn(64, 64, device=dev, dtype=torch.bfloat16)
    mask = x > 0
    img = torch.randn(1, 8, 16, 16, device=dev, dtype=torch.bfloat16)
    weight = torch.randn(8, 8, 3, 3, device=dev, dtype=torch.bfloat16)
    sig = torch.randn(8, 256, device=dev)
    ops = {
        "view": {"x.view(-1)": lambda: x.view(-1), "x[:, :32]": lambda: x[:, :32],
                 "x.t()": lambda: x.t(), "x.unsqueeze(0)": lambda: x.unsqueeze(0),
                 "torch.empty_like(x)": lambda: torch.empty_like(x)},
        "kernel": {"torch.add(x, y)": lambda: torch.add(x, y), "x.mul_(1.0)": lambda: x.mul_(1.0),
                   "torch.cat([x, y])": lambda: torch.cat([x, y]),
                   "x.sum(-1)": lambda: x.sum(-1),
                   "x.masked_fill(mask, 0)": lambda: x.masked_fill(mask, 0.0),
                   "x.float()": lambda: x.float()},
        "library": {"torch.mm(x, y)": lambda: torch.mm(x, y),
                    "F.linear(x, y)": lambda: F.linear(x, y),
                    "F.conv2d 3x3": lambda: F.conv2d(img, weight, padding=1),
                    "torch.fft.rfft": lambda: torch.fft.rfft(sig)},
    }
    out: dict = {"classes": {}}
    for cls, fns in ops.items():
        times = {name: per_op_us(fn, n, repeats, torch) for name, fn in fns.items()}
        out["classes"][cls] = {"ops_us": times, "median_us": statistics.median(times.values())}

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29561")
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=dev)
    buf = torch.ones(1024, device=dev, dtype=torch.bfloat16)
    gathered = torch.empty_like(buf)
    a2a = torch.empty_like(buf)
    colls = {"dist.all_reduce": lambda: dist.all_reduce(buf),
             "dist.all_gather_into_tensor": lambda: dist.all_gather_into_tensor(gathered, buf),
             "dist.all_to_all_single": lambda: dist.all_to_all_single(a2a, buf)}
    times = {name: per_op_us(fn, max(n // 4, 50), repeats, torch) for name, fn in colls.items()}
    out["classes"]["collective"] = {"ops_us": times,
                                    "median_us": statistics.median(times.values())}
    dist.destroy_process_group()

    one = torch.randn(4, device=dev) + 5.0
    syncs: dict[str, list[float]] = {".item()": [], ".tolist()": []}
    for i in range(repeats * 20 + 10):
        for name, fn in ((".item()", lambda: one[0].item()), (".tolist()", one.tolist)):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn()
            t1 = time.perf_counter()
            if i >= 10:
                syncs[name].append((t1 - t0) * 1e6)
    times = {name: statistics.median(v) for name, v in syncs.items()}
    out["classes"]["sync"] = {"ops_us": times, "median_us": statistics.median(times.values())}

    def nothing() -> None:
        return None
    t = per_op_us(nothing, n * 10, repeats, torch)
    out["classes"]["python"] = {"ops_us": {"call of a no-op function": t}, "median_us": t}
    out["environment"] = {"gpu_name": torch.cuda.get_device_name(0), "torch": torch.__version__,
                          "cuda": torch.version.cuda, "nccl": ".".join(
                              map(str, torch.cuda.nccl.version())),
                          "python": platform.python_version(),
                          "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                          "command": "python validate/host_classes.py --out " + args.out}
    with open(args.out, "w") as handle:
        json.dump(out, handle, indent=1)
    print(json.dumps({k: round(v["median_us"], 2) for k, v in out["classes"].items()}))


if __name__ == "__main__":
    main()
