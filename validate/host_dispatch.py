"""Host dispatch: how fast a Python loop of small PyTorch ops and torch.distributed calls can
feed the GPU (cases host.dispatch, one process; host.dispatch_multi, under torchrun).

  host_torch_op     eager torch.add on 1,024 elements in a loop of K: host issue time per op
                    and GPU time per op (CUDA events around the loop); time_us = the larger
  host_dist_call    eager torch.distributed calls (NCCL, 2 KiB bf16) in a loop: likewise, with
                    params.world_size (1 alone; every rank under torchrun)
  host_item_sync    wall time of .item() on a one-element tensor, stream idle
  host_synchronize  wall time of torch.cuda.synchronize(), device idle

Every op's result is checked against its closed form.
"""

from __future__ import annotations

import os
import statistics
import time

from _common import CheckFailed, Emitter, parse_args, run_main


def _loop(fn, n: int, torch) -> tuple[float, float]:
    """(host us per call, GPU us per call) for ``n`` calls of ``fn`` in a Python loop."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    end.record()
    torch.cuda.synchronize()
    return (t1 - t0) * 1e6 / n, start.elapsed_time(end) * 1e3 / n


def _steady(fn, n: int, repeats: int, torch) -> tuple[list[float], float, float]:
    for _ in range(2):
        _loop(fn, n, torch)
    pairs = [_loop(fn, n, torch) for _ in range(repeats)]
    steady = [max(h, g) for h, g in pairs]
    return steady, statistics.median(h for h, _ in pairs), statistics.median(g for _, g in pairs)


def main() -> None:
    args = parse_args(__doc__)
    import torch
    import torch.distributed as dist

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    dev = torch.device("cuda", local)
    torch.cuda.set_device(dev)
    emit = Emitter(args.out, write=rank == 0)
    n = 500 if args.quick else 2000
    repeats = 5 if args.quick else 9

    if world == 1:
        x = torch.randn(1024, device=dev) + 3.0
        y = torch.empty_like(x)

        def op() -> None:
            torch.add(x, 1, out=y)

        y.fill_(float("nan"))
        steady, host, gpu = _steady(op, n, repeats, torch)
        if not torch.equal(y, x + 1):
            raise CheckFailed("torch.add: wrong result")
        emit.measurement("host_torch_op", 0, steady, host_us=host, gpu_us=gpu, calls=n,
                         torch_op="torch.add 1024 fp32")

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29555")
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=dev)
    elems = 1024  # 2 KiB of bf16
    src = torch.full((elems,), float(rank + 1), device=dev, dtype=torch.bfloat16)
    buf = src.clone()
    gathered = torch.empty(elems * world, device=dev, dtype=torch.bfloat16)
    a2a_in = torch.full((elems * world,), float(rank + 1), device=dev, dtype=torch.bfloat16)
    a2a_out = torch.empty_like(a2a_in)
    calls = {
        "all_reduce": lambda: dist.all_reduce(buf),
        "all_gather_into_tensor": lambda: dist.all_gather_into_tensor(gathered, src),
        "all_to_all_single": lambda: dist.all_to_all_single(a2a_out, a2a_in),
        "broadcast": lambda: dist.broadcast(buf, 0),
    }
    for name, fn in calls.items():
        steady, host, gpu = _steady(fn, max(n // 4, 50), repeats, torch)
        emit.measurement("host_dist_call", 2 * elems, steady, collective=name, world_size=world,
                         host_us=host, gpu_us=gpu, calls=max(n // 4, 50), backend="nccl")
    # checks, once each, on fresh buffers
    buf.copy_(src)
    dist.all_reduce(buf)
    if not torch.all(buf == float(world * (world + 1) // 2)):
        raise CheckFailed("all_reduce: wrong sum")
    gathered.fill_(float("nan"))
    dist.all_gather_into_tensor(gathered, src)
    want = torch.arange(1, world + 1, device=dev, dtype=torch.bfloat16).repeat_interleave(elems)
    if not torch.equal(gathered, want):
        raise CheckFailed("all_gather_into_tensor: wrong result")
    a2a_out.fill_(float("nan"))
    dist.all_to_all_single(a2a_out, a2a_in)
    if not torch.equal(a2a_out, want):
        raise CheckFailed("all_to_all_single: wrong result")
    dist.destroy_process_group()

    if world == 1:
        one = torch.randn(1, device=dev) + 5.0
        item, sync = [], []
        for i in range(repeats * 20 + 10):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            value = one.item()
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            t2 = time.perf_counter()
            if i >= 10:
                item.append((t1 - t0) * 1e6)
                sync.append((t2 - t1) * 1e6)
        if value == 0.0:
            raise CheckFailed(".item(): read zero from a non-zero tensor")
        emit.measurement("host_item_sync", 0, item)
        emit.measurement("host_synchronize", 0, sync)


if __name__ == "__main__":
    run_main(main)
