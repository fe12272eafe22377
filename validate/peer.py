"""GPU to GPU over NVLink (or PCIe), one process driving every visible GPU through CuPy.

Cases (2 GPUs or more):
  peer.copy_engine  cudaMemcpyPeerAsync for every ordered pair at one large size, one direction
                    (uni) and both at once (bidir, per unordered pair); sizes 4 KiB .. 1 GiB on
                    GPUs 0 -> 1 (op peer_copy_engine)
  peer.sm_ldst      the copy16 kernel (16-byte loads and stores) on GPU 0 writing GPU 1's memory
                    (push) and on GPU 1 reading GPU 0's (pull), over 1 .. SM-count blocks of
                    1,024 threads at 256 MiB and over sizes on every SM (op peer_sm_ldst)
  peer.tma          a TMA bulk-copy kernel (cp.async.bulk global -> shared -> peer global,
                    double-buffered, one driving thread per block), same sweeps (op peer_tma)
  peer.flag_latency ping-pong of a flag between two GPUs' memories, per round trip
                    (op peer_flag_roundtrip)

``--self`` runs the same kernels with both ends on GPU 0 (local copies): it exercises every
code path on a one-GPU machine; its results are for checking the code, not for calibration.
Every copy is checked byte for byte against its source after poisoning the destination.
"""

from __future__ import annotations

from _common import (
    CheckFailed,
    Emitter,
    GiB,
    Gpu,
    KiB,
    MiB,
    batch_for,
    offset,
    parse_args,
    pool_bytes,
    repeats_for,
    run_main,
    sizes,
)

POISON = 0xC3
THREADS = 1024
TMA_CHUNK = 16 * KiB
TMA_THREADS = 32

TMA_SRC = r"""
// One thread per block moves chunks: bulk load global -> shared (mbarrier completion), then
// bulk store shared -> (peer) global; two buffers so a store overlaps the next load.
extern "C" __global__ void tma_copy(const char* __restrict__ src, char* __restrict__ dst,
                                    unsigned long long nbytes, unsigned int chunk) {
    extern __shared__ __align__(128) char smem[];
    __shared__ __align__(8) unsigned long long bar[2];
    if (threadIdx.x != 0) return;
    unsigned int bars[2], bufs[2], phase[2] = {0u, 0u};
    for (int b = 0; b < 2; ++b) {
        bars[b] = (unsigned int)__cvta_generic_to_shared(&bar[b]);
        bufs[b] = (unsigned int)__cvta_generic_to_shared(smem + b * chunk);
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(bars[b]));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    const unsigned long long chunks = nbytes / chunk;
    unsigned long long k = 0;
    for (unsigned long long c = blockIdx.x; c < chunks; c += gridDim.x, ++k) {
        const int b = (int)(k & 1);
        asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");  // buffer b is free
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                     :: "r"(bars[b]), "r"(chunk) : "memory");
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                     " [%0], [%1], %2, [%3];"
                     :: "r"(bufs[b]), "l"(src + c * chunk), "r"(chunk), "r"(bars[b])
                     : "memory");
        asm volatile("{\n .reg .pred p;\n WAIT_%=:\n"
                     " mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
                     " @!p bra WAIT_%=;\n}" :: "r"(bars[b]), "r"(phase[b]) : "memory");
        phase[b] ^= 1u;
        asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;"
                     :: "l"(dst + c * chunk), "r"(bufs[b]), "r"(chunk) : "memory");
        asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    }
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}
"""

FLAG_SRC = r"""
// Role 0 writes k to the other side and waits for k back; role 1 answers. Volatile accesses
// with system-scope fences: each write travels to the other GPU's memory.
extern "C" __global__ void pingpong(volatile unsigned int* mine, volatile unsigned int* theirs,
                                    unsigned int iters, int role) {
    for (unsigned int k = 1; k <= iters; ++k) {
        if (role == 0) {
            *theirs = k; __threadfence_system();
            while (*mine != k) {}
        } else {
            while (*mine != k) {}
            *theirs = k; __threadfence_system();
        }
    }
}
// Both roles in one launch (block b plays role b): the one-GPU self test.
extern "C" __global__ void pingpong_self(volatile unsigned int* flags, unsigned int iters) {
    if (threadIdx.x != 0) return;
    volatile unsigned int* mine = flags + 32 * blockIdx.x;
    volatile unsigned int* theirs = flags + 32 * (1 - blockIdx.x);
    for (unsigned int k = 1; k <= iters; ++k) {
        if (blockIdx.x == 0) {
            *theirs = k; __threadfence_system();
            while (*mine != k) {}
        } else {
            while (*mine != k) {}
            *theirs = k; __threadfence_system();
        }
    }
}
"""


class Peers:
    """Every visible GPU (or GPU 0 twice with --self), peer access on, pools per GPU."""

    def __init__(self, self_test: bool, top: int) -> None:
        import cupy as cp

        self.cp = cp
        count = cp.cuda.runtime.getDeviceCount()
        if count < 2 and not self_test:
            raise SystemExit(f"peer cases need 2 GPUs, {count} visible (use --self to test "
                             "the code on one)")
        self.ids = [0, 0] if self_test else list(range(count))
        self.gpus = {d: Gpu(d) for d in sorted(set(self.ids))}
        for a in self.gpus:
            for b in self.gpus:
                if a != b:
                    with cp.cuda.Device(a):
                        if not cp.cuda.runtime.deviceCanAccessPeer(a, b):
                            raise SystemExit(f"GPU {a} cannot access GPU {b} (no P2P)")
                        try:
                            cp.cuda.runtime.deviceEnablePeerAccess(b)
                        except cp.cuda.runtime.CUDARuntimeError as exc:
                            if "ALREADY_ENABLED" not in str(exc):
                                raise
        self.pool = pool_bytes(top, max(g.l2_bytes for g in self.gpus.values()))
        self.src, self.dst = {}, {}
        for d, g in self.gpus.items():
            with cp.cuda.Device(d):
                self.src[d] = g.pool(self.pool, seed=10 + d)
                self.dst[d] = cp.full(self.pool, POISON, dtype=cp.uint8)
                mod = cp.RawModule(code=TMA_SRC + FLAG_SRC, options=("-std=c++17",))
                g.tma = mod.get_function("tma_copy")
                g.pingpong = mod.get_function("pingpong")
                g.pingpong_self = mod.get_function("pingpong_self")

    def pairs(self) -> list[tuple[int, int]]:
        if self.ids == [0, 0]:
            return [(0, 0)]
        return [(a, b) for a in self.ids for b in self.ids if a != b]

    # one transfer of n bytes from a's src pool to b's dst pool, slot i
    def ce(self, a: int, b: int, n: int, stream=None):
        cp = self.cp

        def op(i: int) -> None:
            o = offset(i, n, self.pool)
            s = stream or self.gpus[a].stream
            cp.cuda.runtime.memcpyPeerAsync(self.dst[b].data.ptr + o, b,
                                            self.src[a].data.ptr + o, a, n, s.ptr)
        return op

    def ldst(self, a: int, b: int, n: int, blocks: int, mode: str):
        cp = self.cp
        runner = self.gpus[a] if mode == "push" else self.gpus[b]

        def op(i: int) -> None:
            o = offset(i, n, self.pool)
            with cp.cuda.Device(runner.device):
                runner.copy16((blocks,), (THREADS,),
                              (self.src[a][o:], self.dst[b][o:], cp.uint64(n // 16)),
                              stream=runner.stream)
        return op, runner

    def tma(self, a: int, b: int, n: int, blocks: int):
        cp = self.cp
        g = self.gpus[a]
        chunk = min(TMA_CHUNK, n)

        def op(i: int) -> None:
            o = offset(i, n, self.pool)
            with cp.cuda.Device(a):
                g.tma((blocks,), (TMA_THREADS,),
                      (self.src[a][o:], self.dst[b][o:], cp.uint64(n), cp.uint32(chunk)),
                      stream=g.stream, shared_mem=2 * chunk)
        return op

    def check(self, a: int, b: int, n: int, run, i: int = 5) -> None:
        cp = self.cp
        o = offset(i, n, self.pool)
        with cp.cuda.Device(b):
            self.dst[b][o:o + n].fill(POISON)
            cp.cuda.runtime.deviceSynchronize()
        run(i)
        for d in self.gpus:
            with cp.cuda.Device(d):
                cp.cuda.runtime.deviceSynchronize()
        with cp.cuda.Device(b):
            got = self.dst[b][o:o + n]
            if a == b:
                same = bool(cp.array_equal(got, self.src[a][o:o + n]))
            else:  # compare on the host: no cross-device array semantics to rely on
                same = bool((got.get() == self.src[a][o:o + n].get()).all())
            if not same:
                raise CheckFailed(f"{a}->{b} copy of {n} B at offset {o}: wrong bytes")


def time_on(gpu: Gpu, op, n: int, repeats: int) -> list[float]:
    """Per-op GPU time on ``gpu``'s stream (small ops back to back, see batch_for)."""
    with gpu.cp.cuda.Device(gpu.device):
        return gpu.time_op(op, repeats, batch_for(n))


def copy_engine(p: Peers, emit: Emitter, quick: bool) -> None:
    cp = p.cp
    big = 64 * MiB if quick else 256 * MiB
    for a, b in p.pairs():
        op = p.ce(a, b, big)
        times = time_on(p.gpus[a], op, big, repeats_for(big, quick))
        p.check(a, b, big, op)
        emit.measurement("peer_copy_engine", big, times, src=a, dst=b, direction="uni")
    for a, b in p.pairs():
        if a > b:
            continue
        ga, gb = p.gpus[a], p.gpus[b]
        fwd, back = p.ce(a, b, big), p.ce(b, a, big, stream=gb.stream)
        times = []
        for i in range(repeats_for(big, quick) + 2):
            with cp.cuda.Device(a):
                start, end = ga.event(), ga.event()
                ga.spin(100.0)
                start.record(ga.stream)
            with cp.cuda.Device(b):
                gb.stream.wait_event(start)
                back(i)
                done_b = gb.event()
                done_b.record(gb.stream)
            with cp.cuda.Device(a):
                fwd(i)
                ga.stream.wait_event(done_b)
                end.record(ga.stream)
                end.synchronize()
                if i >= 2:
                    times.append(cp.cuda.get_elapsed_time(start, end) * 1e3)
        emit.measurement("peer_copy_engine", big, times, src=a, dst=b, direction="bidir")
    a, b = p.pairs()[0]
    for n in sizes(4 * KiB, 1 * GiB, 16 if quick else 4):
        op = p.ce(a, b, n)
        times = time_on(p.gpus[a], op, n, repeats_for(n, quick))
        p.check(a, b, n, op)
        emit.measurement("peer_copy_engine", n, times, src=a, dst=b, direction="uni",
                         sweep="size", batch=batch_for(n))


def sm_ldst(p: Peers, emit: Emitter, quick: bool) -> None:
    a, b = p.pairs()[0]
    sms = p.gpus[a].sm_count
    big = 64 * MiB if quick else 256 * MiB
    steps = [1, 8, 32, 64, sms] if quick else [1, 2, 4, 8, 16, 24, 32, 48, 64, 96, sms]
    for mode in ("push", "pull"):
        for blocks in steps:
            op, runner = p.ldst(a, b, big, blocks, mode)
            times = time_on(runner, op, big, repeats_for(big, True))
            emit.measurement("peer_sm_ldst", big, times, src=a, dst=b, mode=mode,
                             blocks=blocks, threads=THREADS, sweep="blocks")
        p.check(a, b, big, p.ldst(a, b, big, sms, mode)[0])
        for n in sizes(4 * KiB, 1 * GiB, 16 if quick else 4):
            blocks = min(sms, max(1, n // (THREADS * 64)))  # sized to the data
            op, runner = p.ldst(a, b, n, blocks, mode)
            times = time_on(runner, op, n, repeats_for(n, quick))
            p.check(a, b, n, op)
            emit.measurement("peer_sm_ldst", n, times, src=a, dst=b, mode=mode, blocks=blocks,
                             threads=THREADS, sweep="size", batch=batch_for(n))


def tma(p: Peers, emit: Emitter, quick: bool) -> None:
    a, b = p.pairs()[0]
    sms = p.gpus[a].sm_count
    big = 64 * MiB if quick else 256 * MiB
    steps = [1, 8, 32, sms] if quick else [1, 2, 4, 8, 16, 32, 64, sms, 2 * sms]
    for blocks in steps:
        op = p.tma(a, b, big, blocks)
        times = time_on(p.gpus[a], op, big, repeats_for(big, True))
        emit.measurement("peer_tma", big, times, src=a, dst=b, blocks=blocks,
                         chunk_bytes=TMA_CHUNK, sweep="blocks")
    p.check(a, b, big, p.tma(a, b, big, sms))
    for n in sizes(16 * KiB, 1 * GiB, 16 if quick else 4):
        blocks = min(sms, max(1, n // TMA_CHUNK))  # a chunk or more per block
        op = p.tma(a, b, n, blocks)
        times = time_on(p.gpus[a], op, n, repeats_for(n, quick))
        p.check(a, b, n, op)
        emit.measurement("peer_tma", n, times, src=a, dst=b, blocks=blocks,
                         chunk_bytes=TMA_CHUNK, sweep="size", batch=batch_for(n))


def _pingpong(p: Peers, a: int, b: int, flags: dict[int, object], iters: int) -> float:
    """Microseconds for ``iters`` flag exchanges between GPUs a and b (a == b: two blocks of
    one GPU)."""
    cp = p.cp
    ga, gb = p.gpus[a], p.gpus[b]
    for d in {a, b}:
        with cp.cuda.Device(d):
            flags[d].fill(0)
            cp.cuda.runtime.deviceSynchronize()
    with cp.cuda.Device(a):
        start, end = ga.event(), ga.event()
        start.record(ga.stream)
        if a == b:
            ga.pingpong_self((2,), (32,), (flags[a], cp.uint32(iters)), stream=ga.stream)
        else:
            ga.pingpong((1,), (1,), (flags[a], flags[b], cp.uint32(iters), cp.int32(0)),
                        stream=ga.stream)
    if a != b:
        with cp.cuda.Device(b):
            gb.pingpong((1,), (1,), (flags[b], flags[a], cp.uint32(iters), cp.int32(1)),
                        stream=gb.stream)
    with cp.cuda.Device(a):
        end.record(ga.stream)
        end.synchronize()
        got = int(flags[a][0].get())
    if got != iters:
        raise CheckFailed(f"ping-pong {a}<->{b}: flag {got}, expected {iters}")
    return float(cp.cuda.get_elapsed_time(start, end) * 1e3)


def flag_latency(p: Peers, emit: Emitter, quick: bool) -> None:
    """Round trip from the difference of two ping-pong runs (N2 - N1 exchanges), so launch
    skew between the two GPUs cancels."""
    cp = p.cp
    n1, n2 = (500, 2500) if quick else (2000, 12000)
    repeats = 5 if quick else 11
    pairs = p.pairs() if quick or len(p.ids) <= 2 else [(0, d) for d in p.ids if d != 0]
    for a, b in pairs:
        flags = {}
        for d in {a, b}:
            with cp.cuda.Device(d):
                flags[d] = cp.zeros(64, dtype=cp.uint32)
        _pingpong(p, a, b, flags, 100)
        times = [(_pingpong(p, a, b, flags, n2) - _pingpong(p, a, b, flags, n1)) / (n2 - n1)
                 for _ in range(repeats)]
        emit.measurement("peer_flag_roundtrip", 0, times, src=a, dst=b, exchanges=n2 - n1)


CASES = {"peer.copy_engine": copy_engine, "peer.sm_ldst": sm_ldst, "peer.tma": tma,
         "peer.flag_latency": flag_latency}


def main() -> None:
    args = parse_args(__doc__, lambda p: p.add_argument(
        "--self", dest="self_test", action="store_true",
        help="both ends on GPU 0: exercise the code on one GPU"))
    if args.case not in CASES:
        raise SystemExit(f"peer.py: unknown case {args.case!r}")
    top = 64 * MiB if args.quick else 1 * GiB
    peers = Peers(args.self_test, max(top, 256 * MiB))
    emit = Emitter(args.out)
    emit.data(gpus=len(set(peers.ids)), self_test=args.self_test,
              gpu_name=peers.gpus[0].name)
    CASES[args.case](peers, emit, args.quick)
    for g in peers.gpus.values():
        with peers.cp.cuda.Device(g.device):
            g.check_error()


if __name__ == "__main__":
    run_main(main)
