"""Device time of PyTorch's own kernels, by the kernel kind the traced reference uses.

    python validate/kernel_kinds.py --case kernels.kinds --out PATH [--quick]

For each kind of pkbsim.trace.classes (elementwise, copy, fill, reduction, index, scan, sort,
gemm, conv, attention, fft) a few representative operators run at several sizes on one GPU.
Each operator is first described by pkbsim's own trace recorder (pkbsim.trace.recorder, the
same code that makes tasks/traces), so the kind, the kernels per call, the bytes read plus
written and the FLOPs are counted exactly as in a traced program. Its device time per call is
then timed by replaying a CUDA graph of ``n`` calls (``n`` chosen so a replay lasts about 2 ms,
three replays, the median): graph replay keeps the host out of the timing, so small sizes show
the kernel's own fixed cost. An operator a graph cannot capture (it synchronises) is timed as
``n`` eager calls between CUDA events. One ``kernel_kind`` measurement per (operator, size):
``time_us`` per call, ``size_bytes`` the bytes read plus written, params ``kind``, ``op``,
``shape``, ``dtype``, ``kernels`` (per call), ``flops``, ``tensor_core``, ``timing``
(graph/eager), ``calls`` (per replay), ``rep`` (the whole list is timed twice, one pass after
the other, so that the spread between passes can be told from the model's error).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import _common

DEVICE = os.environ.get("KERNEL_KINDS_DEVICE", "cuda")  # cpu: a dry run in tests
TARGET_S = 2e-3  # one replay lasts about this long
REPLAYS = 3
REPS = 2  # every operator and size is timed in two passes over the list (run-to-run spread)


def cases(torch: Any, quick: bool) -> list[tuple[str, str, Callable[[], Callable[[], Any]], str]]:
    """(operator label, dtype, make -> call, shape text) for every operator and size.

    Row-wise operators run on (rows, 32000) like a vocabulary (GRPO's log-probs) and on
    (rows, 1024) like PKB's inputs; 1-D sizes cover 64 Ki to 64 Mi elements. Left out: gathers
    of a few elements from a large source (gather, embedding), whose traced bytes count the
    whole source (the recorder's rule) and so say nothing of their kind's rate."""
    F = torch.nn.functional
    dev = DEVICE
    bf, f32 = torch.bfloat16, torch.float32
    out: list[tuple[str, str, Callable[[], Callable[[], Any]], str]] = []
    elems = [2**16, 2**18, 2**20, 2**22, 2**24, 2**26]
    rows_v = [16, 64, 256, 1024, 4096]  # x 32000
    rows_n = [64, 256, 1024, 4096, 16384]  # x 1024
    gemm = [256, 512, 1024, 2048, 4096, 8192]
    if quick:
        elems, rows_v, rows_n, gemm = elems[::2], rows_v[::2], rows_n[::2], gemm[::2]

    def add(label: str, dtype: Any, make: Callable[[], Callable[[], Any]], shape: str) -> None:
        out.append((label, str(dtype).removeprefix("torch."), make, shape))

    def vec(n: int, dtype: Any) -> Any:
        return torch.rand(n, device=dev, dtype=f32).to(dtype) + 0.5

    def mat(r: int, c: int, dtype: Any) -> Any:
        return torch.rand(r, c, device=dev, dtype=f32).to(dtype) + 0.5

    for n in elems:
        def mk_add(n: int = n) -> Callable[[], Any]:
            x, y = vec(n, bf), vec(n, bf)
            return lambda: x + y
        add("aten.add", bf, mk_add, f"[{n}]")

        def mk_exp(n: int = n) -> Callable[[], Any]:
            x = vec(n, f32)
            return lambda: torch.exp(x)
        add("aten.exp", f32, mk_exp, f"[{n}]")

        def mk_clone(n: int = n) -> Callable[[], Any]:
            x = vec(n, bf)
            return lambda: x.clone()
        add("aten.clone", bf, mk_clone, f"[{n}]")

        def mk_float(n: int = n) -> Callable[[], Any]:
            x = vec(n, bf)
            return lambda: x.float()
        add("aten._to_copy", bf, mk_float, f"[{n}]")

        def mk_zeros(n: int = n) -> Callable[[], Any]:
            return lambda: torch.zeros(n, device=dev, dtype=bf)
        add("aten.zeros", bf, mk_zeros, f"[{n}]")

        def mk_sum(n: int = n) -> Callable[[], Any]:
            x = vec(n, bf)
            return lambda: x.sum()
        add("aten.sum", bf, mk_sum, f"[{n}]")

        def mk_cumsum(n: int = n) -> Callable[[], Any]:
            x = vec(n, f32)
            return lambda: torch.cumsum(x, 0)
        add("aten.cumsum", f32, mk_cumsum, f"[{n}]")

        def mk_sort1(n: int = n) -> Callable[[], Any]:
            x = vec(n, f32)
            return lambda: torch.sort(x)
        add("aten.sort", f32, mk_sort1, f"[{n}]")

        def mk_index_select(n: int = n) -> Callable[[], Any]:
            x = mat(n // 256, 256, bf)
            idx = torch.randint(0, n // 256, (n // 256,), device=dev)
            return lambda: x.index_select(0, idx)
        add("aten.index_select", bf, mk_index_select, f"[{n // 256},256]")

        def mk_fft(n: int = n) -> Callable[[], Any]:
            x = mat(max(1, n // 1024), 1024, f32)
            return lambda: torch.fft.rfft(x, dim=-1)
        add("aten._fft_r2c", f32, mk_fft, f"[{max(1, n // 1024)},1024]")

    for rows in rows_v:
        c = 32000

        def mk_sort(rows: int = rows, c: int = c) -> Callable[[], Any]:
            x = mat(rows, c, f32)
            return lambda: torch.sort(x, dim=-1, descending=True)
        add("aten.sort", f32, mk_sort, f"[{rows},{c}]")

        def mk_topk(rows: int = rows, c: int = c) -> Callable[[], Any]:
            x = mat(rows, c, f32)
            return lambda: torch.topk(x, 10, dim=-1)
        add("aten.topk", f32, mk_topk, f"[{rows},{c}]")

        def mk_lsm(rows: int = rows, c: int = c) -> Callable[[], Any]:
            x = mat(rows, c, f32)
            return lambda: torch.log_softmax(x, dim=-1)
        add("aten._log_softmax", f32, mk_lsm, f"[{rows},{c}]")

        def mk_sm(rows: int = rows, c: int = c) -> Callable[[], Any]:
            x = mat(rows, c, f32)
            return lambda: torch.softmax(x, dim=-1)
        add("aten._softmax", f32, mk_sm, f"[{rows},{c}]")

        def mk_cs(rows: int = rows, c: int = c) -> Callable[[], Any]:
            x = mat(rows, c, f32)
            return lambda: torch.cumsum(x, dim=-1)
        add("aten.cumsum", f32, mk_cs, f"[{rows},{c}]")

        def mk_scatter(rows: int = rows, c: int = c) -> Callable[[], Any]:
            x = mat(rows, c, f32)
            idx = torch.argsort(torch.rand(rows, c, device=dev), dim=-1)
            src = mat(rows, c, f32)
            return lambda: x.scatter(-1, idx, src)
        add("aten.scatter", f32, mk_scatter, f"[{rows},{c}]")

        def mk_where(rows: int = rows, c: int = c) -> Callable[[], Any]:
            x = mat(rows, c, f32)
            mask = x > 1.0
            return lambda: x.masked_fill(mask, float("-inf"))
        add("aten.masked_fill", f32, mk_where, f"[{rows},{c}]")

    for rows in rows_n:
        c = 1024

        def mk_ln(rows: int = rows, c: int = c) -> Callable[[], Any]:
            x, w, b = mat(rows, c, bf), vec(c, bf), vec(c, bf)
            return lambda: F.layer_norm(x, (c,), w, b)
        add("aten.native_layer_norm", bf, mk_ln, f"[{rows},{c}]")

        def mk_rsum(rows: int = rows, c: int = c) -> Callable[[], Any]:
            x = mat(rows, c, bf)
            return lambda: x.float().pow(2).sum(-1)
        add("aten.sum+pow+float", bf, mk_rsum, f"[{rows},{c}]")

        def mk_cat(rows: int = rows, c: int = c) -> Callable[[], Any]:
            x, y = mat(rows, c, bf), mat(rows, c, bf)
            return lambda: torch.cat([x, y], dim=0)
        add("aten.cat", bf, mk_cat, f"[{rows},{c}]x2")

        def mk_sdpa(rows: int = rows, c: int = c) -> Callable[[], Any]:
            seq = max(64, rows // 4)
            q = torch.rand(1, 8, seq, 128, device=dev, dtype=bf)
            return lambda: F.scaled_dot_product_attention(q, q, q, is_causal=True)
        add("aten.sdpa", bf, mk_sdpa, f"[1,8,{max(64, rows // 4)},128]")

        def mk_conv(rows: int = rows) -> Callable[[], Any]:
            side = max(8, int((rows // 4) ** 0.5))
            x = torch.rand(4, 64, side, side, device=dev, dtype=bf)
            w = torch.rand(64, 64, 3, 3, device=dev, dtype=bf)
            return lambda: F.conv2d(x, w, padding=1)
        add("aten.convolution", bf, mk_conv, f"[4,64,{max(8, int((rows // 4) ** 0.5))}]^2")

    for n in gemm:
        def mk_mm(n: int = n) -> Callable[[], Any]:
            a, b = mat(n, n, bf), mat(n, n, bf)
            return lambda: a @ b
        add("aten.mm", bf, mk_mm, f"[{n},{n}]x[{n},{n}]")

        def mk_mm32(n: int = n) -> Callable[[], Any]:
            a, b = mat(n, 1024, f32), mat(1024, 256, f32)
            return lambda: a @ b
        add("aten.mm", f32, mk_mm32, f"[{n},1024]x[1024,256]")
    return out


def describe(torch: Any, fn: Callable[[], Any]) -> list[Any]:
    """The traced ops of one call (pkbsim's recorder), launching operators only."""
    from pkbsim.trace.recorder import recording

    with recording() as rec:
        fn()
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    return [op for op in rec.ops if op.kernels > 0]


def time_graph(torch: Any, fn: Callable[[], Any], n: int) -> list[float]:
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(n):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(REPLAYS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / n)
    del graph
    return times


def time_eager(torch: Any, fn: Callable[[], Any], n: int) -> list[float]:
    times = []
    for _ in range(REPLAYS):
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(n):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / n)
    return times


def main() -> None:
    args = _common.parse_args(__doc__ or "")
    import torch

    if not torch.cuda.is_available():
        raise _common.CheckFailed("no CUDA device")
    emit = _common.Emitter(args.out)
    torch.backends.cuda.matmul.allow_tf32 = False
    for rep, (label, dtype, make, shape) in ((r, c) for r in range(REPS)
                                             for c in cases(torch, args.quick)):
        fn = make()
        ops = describe(torch, fn)
        if not ops:
            raise _common.CheckFailed(f"{label} {shape}: the recorder saw no kernel")
        kinds = sorted({op.kind for op in ops})
        kernels = sum(op.kernels for op in ops)
        nbytes = sum(op.read_bytes + op.write_bytes for op in ops)
        flops = sum(op.flops for op in ops)
        tensor_core = any(op.tensor_core for op in ops)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        fn()
        start.record()
        fn()
        end.record()
        end.synchronize()
        once_s = max(start.elapsed_time(end) * 1e-3, 1e-6)
        n = max(1, min(200, int(TARGET_S / once_s)))
        try:
            times, how = time_graph(torch, fn, n), "graph"
        except Exception:  # a synchronising operator: eager, between events
            torch.cuda.synchronize()
            times, how = time_eager(torch, fn, n), "eager"
        emit.measurement("kernel_kind", nbytes, times, kind="+".join(kinds), op=label,
                         ops=[op.op for op in ops], shape=shape, dtype=dtype,
                         kernels=kernels, flops=flops, tensor_core=tensor_core, timing=how,
                         calls=n, rep=rep)
        del fn
        torch.cuda.empty_cache()


if __name__ == "__main__":
    _common.run_main(main)
