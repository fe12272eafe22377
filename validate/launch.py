"""Kernel launch costs, eager and inside a CUDA graph (case launch.kernel).

  launch_graph_node     GPU time per node of a graph of K empty kernels, replayed
  launch_eager_queued   GPU time per empty kernel launched eagerly while a spin kernel holds
                        the stream, so all K are queued before the first runs
  launch_eager_host     host time per eager launch of an empty kernel from a Python loop (CuPy)
  launch_sync_roundtrip wall time of launching one empty kernel and synchronising the stream

A flag kernel checks that launches ran: each of K launches increments a counter once.
"""

from __future__ import annotations

import time

from _common import CheckFailed, Emitter, Gpu, parse_args, run_main

COUNT_SRC = r"""
extern "C" __global__ void bump(unsigned int* counter) { atomicAdd(counter, 1u); }
"""


def main() -> None:
    args = parse_args(__doc__)
    gpu = Gpu(0)
    cp = gpu.cp
    emit = Emitter(args.out)
    k = 500 if args.quick else 2000
    repeats = 7 if args.quick else 21
    stream = gpu.stream

    # Correctness: K eager and K graph launches of a counting kernel bump the counter 2K times.
    bump = cp.RawModule(code=COUNT_SRC).get_function("bump")
    counter = cp.zeros(1, dtype=cp.uint32)
    for _ in range(k):
        bump((1,), (1,), (counter,), stream=stream)
    stream.begin_capture()
    for _ in range(k):
        bump((1,), (1,), (counter,), stream=stream)
    graph = stream.end_capture()
    graph.launch(stream)
    stream.synchronize()
    if int(counter.get()[0]) != 2 * k:
        raise CheckFailed(f"counter {int(counter.get()[0])} after {2 * k} launches")

    # Graph of K empty nodes.
    stream.begin_capture()
    for _ in range(k):
        gpu.empty((1,), (1,), (), stream=stream)
    graph = stream.end_capture()
    for _ in range(3):
        graph.launch(stream)
    stream.synchronize()
    per_node = []
    for _ in range(repeats):
        start, end = gpu.event(), gpu.event()
        start.record(stream)
        graph.launch(stream)
        end.record(stream)
        end.synchronize()
        per_node.append(cp.cuda.get_elapsed_time(start, end) * 1e3 / k)
    emit.measurement("launch_graph_node", 0, per_node, nodes=k)

    # Eager: host issue time per launch, and GPU time per launch with the queue pre-filled. K
    # stays under the driver's launch queue (about 1,000 pending launches): past it the host
    # blocks until the spin ends and the GPU drains.
    host, queued = [], []
    q = min(k, 256)
    spin_us = 10000.0
    for i in range(repeats + 2):
        start, end = gpu.event(), gpu.event()
        gpu.spin(spin_us)
        start.record(stream)
        t0 = time.perf_counter()
        for _ in range(q):
            gpu.empty((1,), (1,), (), stream=stream)
        t1 = time.perf_counter()
        end.record(stream)
        end.synchronize()
        host_us = (t1 - t0) * 1e6
        if host_us > 0.8 * spin_us:  # the GPU may have caught up with the host: a sample lost
            if spin_us >= 100000.0:
                raise CheckFailed(f"{q} eager launches took {host_us:.0f} us of host time: "
                                  "the launch queue does not fill ahead of the GPU")
            spin_us *= 2
            continue
        if i >= 2:
            host.append(host_us / q)
            queued.append(cp.cuda.get_elapsed_time(start, end) * 1e3 / q)
    emit.measurement("launch_eager_queued", 0, queued, kernels=q)
    emit.measurement("launch_eager_host", 0, host, kernels=q, api="cupy RawKernel")

    # One launch and a synchronise, from an idle stream.
    trips = []
    for i in range(repeats * 20 + 10):
        stream.synchronize()
        t0 = time.perf_counter()
        gpu.empty((1,), (1,), (), stream=stream)
        stream.synchronize()
        if i >= 10:
            trips.append((time.perf_counter() - t0) * 1e6)
    emit.measurement("launch_sync_roundtrip", 0, trips)
    gpu.check_error()


if __name__ == "__main__":
    run_main(main)
