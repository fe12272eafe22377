"""PKB 18 (tp_rms_norm) with two Triton kernels around the NCCL all-reduce.

Kernel 1: one program per row accumulates the fp32 sum of squares of the local hidden slice.
NCCL all-reduces those [rows] fp32 sums (the hidden dimension is sharded over the ranks).
Kernel 2: one program per row computes rsqrt(sum / (H_local * W) + eps), scales the row,
rounds to the input dtype (as the reference's .to(input_dtype)) and multiplies by the weight
with one more rounding, writing the output once.

Timeline behaviour: 2 Triton launches + 1 small NCCL all-reduce per call (the reference: ~9
eager kernels); each kernel reads the 2 MiB input once.
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
    def _row_sumsq_kernel(x_ptr, ss_ptr, n_cols, stride_row, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        base = x_ptr + row.to(tl.int64) * stride_row
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, n_cols, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            x = tl.load(base + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
            acc += x * x
        tl.store(ss_ptr + row, tl.sum(acc, axis=0))

    @triton.jit
    def _row_scale_kernel(x_ptr, w_ptr, ss_ptr, out_ptr, n_cols, stride_x, stride_o,
                          inv_hidden, eps, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        rstd = tl.rsqrt(tl.load(ss_ptr + row) * inv_hidden + eps)
        x_row = x_ptr + row.to(tl.int64) * stride_x
        o_row = out_ptr + row.to(tl.int64) * stride_o
        for start in range(0, n_cols, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            mask = cols < n_cols
            x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
            y = (x * rstd).to(x_ptr.dtype.element_ty).to(tl.float32)  # .to(input_dtype)
            tl.store(o_row + cols, (w * y).to(out_ptr.dtype.element_ty), mask=mask)


def _torch_path(x, weight, eps):
    xf = x.to(torch.float32)
    ss = xf.pow(2).sum(dim=-1, keepdim=True)
    dist.all_reduce(ss, op=dist.ReduceOp.SUM)
    var = ss / (x.shape[-1] * dist.get_world_size())
    return weight * (xf * torch.rsqrt(var + eps)).to(x.dtype)


def solution(local_hidden_states: torch.Tensor, local_weight: torch.Tensor,
             variance_epsilon: float) -> torch.Tensor:
    if not local_hidden_states.is_cuda:
        return _torch_path(local_hidden_states, local_weight, variance_epsilon)

    hidden = local_hidden_states.shape[-1]
    x = local_hidden_states.reshape(-1, hidden)
    if x.stride(-1) != 1:
        x = x.contiguous()
    w = local_weight.contiguous()
    rows = x.shape[0]
    world_size = dist.get_world_size()
    block = min(triton.next_power_of_2(hidden), 4096)
    warps = 4 if block <= 1024 else 8

    ss = torch.empty(rows, dtype=torch.float32, device=x.device)
    _row_sumsq_kernel[(rows,)](x, ss, hidden, x.stride(0), BLOCK=block, num_warps=warps)
    dist.all_reduce(ss, op=dist.ReduceOp.SUM)

    out_dtype = torch.promote_types(local_weight.dtype, local_hidden_states.dtype)
    out = torch.empty((rows, hidden), dtype=out_dtype, device=x.device)
    _row_scale_kernel[(rows,)](x, w, ss, out, hidden, x.stride(0), out.stride(0),
                               1.0 / (hidden * world_size), float(variance_epsilon),
                               BLOCK=block, num_warps=warps)
    return out.view(local_hidden_states.shape)
