"""PKB 9 (layernorm_backward): one fused Triton column reduction for both gradients.

d_beta = sum_rows(dY) and d_gamma = sum_rows(dY * X_hat) are computed together: kernel 1 reads
each (BLOCK_M x BLOCK_N) tile of X_hat and dY once and writes fp32 partial column sums for a
slab of rows (grid: column blocks x row slabs); kernel 2 adds the slabs and writes both
gradients, rounded to the input dtype, into one packed [2, H] buffer. The product dY * X_hat
is rounded to the input dtype before summing, as the reference's bf16 multiply does. The two
rows are then all-reduced separately, each with the reference's size and dtype: NCCL sums bf16
with a rounding per hop whose order depends on the buffer's layout, so one packed all-reduce
could differ from the reference by more than 1e-2 on cancelling sums at W >= 3.

Timeline behaviour: 2 Triton launches + 2 NCCL all-reduces per call (the reference: 3 kernels
+ 2 all-reduces), each input read once.
The PyTorch fallback runs only off CUDA (CPU check).
"""
import torch
import torch.distributed as dist

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only machine: only the fallback below can run
    triton = None

if triton is not None:
    @triton.jit
    def _partial_kernel(x_ptr, dy_ptr, part_ptr, B, H, stride_x, stride_dy,
                        ROWS_PER_PROG: tl.constexpr, BLOCK_M: tl.constexpr,
                        BLOCK_N: tl.constexpr):
        pid_n = tl.program_id(0)
        pid_m = tl.program_id(1)
        cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        cmask = cols < H
        dg = tl.zeros([BLOCK_N], dtype=tl.float32)
        db = tl.zeros([BLOCK_N], dtype=tl.float32)
        for i in range(0, ROWS_PER_PROG, BLOCK_M):
            rows = pid_m * ROWS_PER_PROG + i + tl.arange(0, BLOCK_M)
            mask = (rows < B)[:, None] & cmask[None, :]
            r64 = rows.to(tl.int64)[:, None]
            x = tl.load(x_ptr + r64 * stride_x + cols[None, :], mask=mask, other=0.0)
            dy = tl.load(dy_ptr + r64 * stride_dy + cols[None, :], mask=mask, other=0.0)
            prod = (dy.to(tl.float32) * x.to(tl.float32)).to(dy_ptr.dtype.element_ty)
            dg += tl.sum(prod.to(tl.float32), axis=0)
            db += tl.sum(dy.to(tl.float32), axis=0)
        base = part_ptr + pid_m * 2 * H
        tl.store(base + cols, dg, mask=cmask)
        tl.store(base + H + cols, db, mask=cmask)

    @triton.jit
    def _finalize_kernel(part_ptr, out_ptr, n, n_slabs, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for s in range(0, n_slabs):
            acc += tl.load(part_ptr + s * n + offs, mask=mask, other=0.0)
        tl.store(out_ptr + offs, acc.to(out_ptr.dtype.element_ty), mask=mask)


@torch.no_grad()
def solution(X_hat: torch.Tensor, dY: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    if not dY.is_cuda or dY.dim() != 2:  # CPU check (and non-2-D inputs): the reference's math
        d_beta = dY.sum(dim=0)
        d_gamma = (dY * X_hat).sum(dim=0)
        dist.all_reduce(d_beta, op=dist.ReduceOp.SUM)
        dist.all_reduce(d_gamma, op=dist.ReduceOp.SUM)
        return d_gamma, d_beta

    x = X_hat if X_hat.stride(-1) == 1 else X_hat.contiguous()
    dy = dY if dY.stride(-1) == 1 else dY.contiguous()
    B, H = dy.shape
    block_m, block_n, rows_per_prog = 32, 64, 128
    n_slabs = triton.cdiv(B, rows_per_prog)
    partial = torch.empty((n_slabs, 2, H), dtype=torch.float32, device=dy.device)
    _partial_kernel[(triton.cdiv(H, block_n), n_slabs)](
        x, dy, partial, B, H, x.stride(0), dy.stride(0),
        ROWS_PER_PROG=rows_per_prog, BLOCK_M=block_m, BLOCK_N=block_n, num_warps=4)

    packed = torch.empty((2, H), dtype=torch.promote_types(dY.dtype, X_hat.dtype),
                         device=dy.device)
    block = 1024
    _finalize_kernel[(triton.cdiv(2 * H, block),)](partial, packed, 2 * H, n_slabs,
                                                   BLOCK=block, num_warps=4)
    d_gamma, d_beta = packed[0], packed[1]
    dist.all_reduce(d_beta, op=dist.ReduceOp.SUM)  # the reference's order: d_beta, then d_gamma
    dist.all_reduce(d_gamma, op=dist.ReduceOp.SUM)
    return d_gamma, d_beta
