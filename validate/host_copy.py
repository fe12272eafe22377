"""Host <-> device copies from and to pinned memory, 1 KiB .. 1 GiB (case host.copy).

  h2d_pinned  cudaMemcpyAsync host to device, GPU time per copy (spin kernel ahead; small
              copies back to back in batches, params.batch)
  d2h_pinned  cudaMemcpyAsync device to host, likewise

Host and device sides rotate through pools (the device pool at least 4 x L2). The host pool is
filled with random non-zero bytes; each size's last copies are checked byte for byte.
"""

from __future__ import annotations

import numpy as np
from _common import (
    CheckFailed,
    Emitter,
    GiB,
    Gpu,
    KiB,
    batch_for,
    offset,
    parse_args,
    pool_bytes,
    repeats_for,
    run_main,
    sizes,
)

POISON = 0x5A


def main() -> None:
    args = parse_args(__doc__)
    gpu = Gpu(0)
    cp = gpu.cp
    emit = Emitter(args.out)
    top = 1 * GiB
    size_list = sizes(1 * KiB, top, 16 if args.quick else 2)
    pool = pool_bytes(top, gpu.l2_bytes)
    mem = cp.cuda.alloc_pinned_memory(pool)
    host = np.frombuffer(mem, dtype=np.uint8, count=pool)
    block = np.random.default_rng(3).integers(1, 256, size=64 * 1024 * 1024 + 7, dtype=np.uint8)
    for start in range(0, pool, block.size):  # random, non-zero, not periodic in 2^k
        host[start:start + block.size] = block[:pool - start]
    back_mem = cp.cuda.alloc_pinned_memory(pool)
    back = np.frombuffer(back_mem, dtype=np.uint8, count=pool)
    dev = cp.full(pool, POISON, dtype=cp.uint8)
    rt = cp.cuda.runtime
    emit.data(gpu_name=gpu.name, pool_bytes=pool)

    def h2d(n: int):
        def op(i: int) -> None:
            o = offset(i, n, pool)
            rt.memcpyAsync(dev.data.ptr + o, host.ctypes.data + o, n, rt.memcpyHostToDevice,
                           gpu.stream.ptr)
        return op

    def d2h(n: int):
        def op(i: int) -> None:
            o = offset(i, n, pool)
            rt.memcpyAsync(back.ctypes.data + o, dev.data.ptr + o, n, rt.memcpyDeviceToHost,
                           gpu.stream.ptr)
        return op

    for n in size_list:
        reps, batch = repeats_for(n, args.quick), batch_for(n)
        times = gpu.time_op(h2d(n), reps, batch)
        emit.measurement("h2d_pinned", n, times, pinned=True, batch=batch)
        times = gpu.time_op(d2h(n), reps, batch)
        emit.measurement("d2h_pinned", n, times, pinned=True, batch=batch)
        # check: fresh slot, poisoned both ways, then host -> device -> host
        i = 11
        o = offset(i, n, pool)
        dev[o:o + n].fill(POISON)
        back[o:o + n] = POISON
        gpu.stream.synchronize()
        h2d(n)(i)
        d2h(n)(i)
        gpu.stream.synchronize()
        if not np.array_equal(back[o:o + n], host[o:o + n]):
            raise CheckFailed(f"host round trip of {n} B at offset {o}: wrong bytes")
    gpu.check_error()


if __name__ == "__main__":
    run_main(main)
