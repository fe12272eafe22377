"""Tensor-parallel RMSNorm: the hidden dim is sharded, so the sum of squares is
all-reduced before normalising. A dedicated high-priority NCCL communicator keeps the
tiny reduction from queueing behind other traffic on the default group."""
import functools

import torch
import torch.distributed as dist
import triton
import triton.language as tl


@functools.lru_cache(maxsize=None)
def _norm_group():
    opts = dist.ProcessGroupNCCL.Options()
    opts.is_high_priority_stream = True
    return dist.new_group(backend="nccl", pg_options=opts)  # expect: nccl_metadata setup


@triton.jit
def _row_sumsq(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        acc += v * v
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


@triton.jit
def _apply(x_ptr, w_ptr, ss_ptr, out_ptr, n_cols, hidden, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    inv = tl.rsqrt(tl.load(ss_ptr + row) / hidden + eps)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        m = cols < n_cols
        v = tl.load(x_ptr + row * n_cols + cols, mask=m, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
        tl.store(out_ptr + row * n_cols + cols, (w * (v * inv)).to(out_ptr.dtype.element_ty), mask=m)


def solution(local_hidden_states: torch.Tensor, local_weight: torch.Tensor, variance_epsilon: float) -> torch.Tensor:
    x = local_hidden_states.contiguous()
    group = _norm_group()
    rows, cols = x.shape
    sumsq = torch.empty(rows, dtype=torch.float32, device=x.device)
    _row_sumsq[(rows,)](x, sumsq, cols, BLOCK=1024)
    dist.all_reduce(sumsq, op=dist.ReduceOp.SUM, group=group)  # expect: nccl_payload hot
    hidden = cols * dist.get_world_size(group)
    out = torch.empty_like(x)
    _apply[(rows,)](x, local_weight.reshape(-1), sumsq, out, cols, float(hidden), variance_epsilon, BLOCK=1024)
    return out
