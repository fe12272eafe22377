"""HBM: device-to-device copies by the copy engine and by an SM kernel (16-byte accesses).

Cases:
  hbm.copy_engine  cudaMemcpyAsync device to device over sizes 4 KiB .. 1 GiB (op d2d_copy_engine)
  hbm.sm_copy      the copy16 kernel over the same sizes, its grid sized to the data as a
                   library kernel's is (blocks of 1,024 threads, one 16-byte access per thread,
                   at most 4 blocks per SM), then at 1 GiB over 1 .. 8 x SM-count blocks: how
                   many SMs saturate memory (op d2d_sm_copy, params.blocks, params.sweep)

Small copies are timed back to back in batches (params.batch; the stream's steady cost per
copy), large ones alone.

Every copy reads a pool of random non-zero bytes and writes a poisoned pool; each size's last
copy is compared byte for byte with its source. Slots rotate through pools of at least 4 x L2.
"""

from __future__ import annotations

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

THREADS = 1024
POISON = 0xA5


def main() -> None:
    args = parse_args(__doc__)
    gpu = Gpu(0)
    cp = gpu.cp
    emit = Emitter(args.out)
    top = 1 * GiB
    size_list = sizes(4 * KiB, top, 16 if args.quick else 4)
    pool = pool_bytes(top, gpu.l2_bytes)
    src = gpu.pool(pool, seed=1)
    dst = cp.full(pool, POISON, dtype=cp.uint8)
    emit.data(gpu_name=gpu.name, sm_count=gpu.sm_count, l2_bytes=gpu.l2_bytes,
              pool_bytes=pool)

    def ce_copy(n: int):
        def op(i: int) -> None:
            o = offset(i, n, pool)
            cp.cuda.runtime.memcpyAsync(dst.data.ptr + o, src.data.ptr + o, n,
                                        cp.cuda.runtime.memcpyDeviceToDevice, gpu.stream.ptr)
        return op

    def sm_copy(n: int, blocks: int):
        def op(i: int) -> None:
            o = offset(i, n, pool)
            gpu.copy16((blocks,), (THREADS,), (src[o:], dst[o:], cp.uint64(n // 16)),
                       stream=gpu.stream)
        return op

    def check(n: int, i: int, what: str) -> None:
        o = offset(i, n, pool)
        dst[o:o + n].fill(POISON)
        gpu.stream.synchronize()
        (ce_copy(n) if what == "ce" else sm_copy(n, grid(n)))(i)
        gpu.stream.synchronize()
        if not bool(cp.array_equal(dst[o:o + n], src[o:o + n])):
            raise CheckFailed(f"{what} copy of {n} B at offset {o}: wrong bytes")

    full = 4 * gpu.sm_count

    def grid(n: int) -> int:  # one 16-byte access per thread, at most 4 blocks per SM
        return min(full, max(1, n // (THREADS * 16)))

    if args.case == "hbm.copy_engine":
        for n in size_list:
            times = gpu.time_op(ce_copy(n), repeats_for(n, args.quick), batch_for(n))
            check(n, 7, "ce")
            emit.measurement("d2d_copy_engine", n, times, hbm_bytes=2 * n, batch=batch_for(n))
    elif args.case == "hbm.sm_copy":
        for n in size_list:
            times = gpu.time_op(sm_copy(n, grid(n)), repeats_for(n, args.quick), batch_for(n))
            check(n, 7, "sm")
            emit.measurement("d2d_sm_copy", n, times, blocks=grid(n), threads=THREADS,
                             hbm_bytes=2 * n, batch=batch_for(n), sweep="size")
        n = top
        steps = [1, 2, 4, 8, 16, 32, 64, 96, gpu.sm_count, 2 * gpu.sm_count,
                 4 * gpu.sm_count, 8 * gpu.sm_count]
        if args.quick:
            steps = [1, 8, 32, 64, gpu.sm_count, 4 * gpu.sm_count]
        for blocks in sorted(set(steps)):
            times = gpu.time_op(sm_copy(n, blocks), repeats_for(n, True))
            emit.measurement("d2d_sm_copy", n, times, blocks=blocks, threads=THREADS,
                             hbm_bytes=2 * n, batch=1, sweep="blocks")
    else:
        raise SystemExit(f"hbm.py: unknown case {args.case!r}")
    gpu.check_error()


if __name__ == "__main__":
    run_main(main)
