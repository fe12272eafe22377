"""PKB 45 (reducescatter_fused_rmsnorm): NCCL reduce-scatter, then one fused Triton kernel.

After NCCL's reduce-scatter (sum) into a bf16 buffer, a single Triton kernel does the rest in
place on that buffer: divide by the world size (rounded to the input dtype as the reference's
in-place div_), fp32 mean of squares per row, rsqrt(mean + eps), scale, gamma, cast back.
Each program handles BLOCK_R rows of the (rows, hidden) view; gamma is loaded once per program.

Timeline behaviour: one NCCL reduce-scatter + one Triton launch per call, writing the result
in place into the collective's output buffer (no extra allocation).
The PyTorch fallback runs only off CUDA (CPU check).
"""
import torch
import torch.distributed as dist
from torch import Tensor

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only machine: only the fallback below can run
    triton = None

if triton is not None:
    @triton.jit
    def _avg_rmsnorm_kernel(x_ptr, g_ptr, rows, hidden, inv_world, eps,
                            BLOCK_R: tl.constexpr, BLOCK_H: tl.constexpr):
        pid = tl.program_id(0)
        r = pid * BLOCK_R + tl.arange(0, BLOCK_R)
        c = tl.arange(0, BLOCK_H)
        rmask = r < rows
        cmask = c < hidden
        mask = rmask[:, None] & cmask[None, :]
        offs = r.to(tl.int64)[:, None] * hidden + c[None, :]
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        x = (x * inv_world).to(x_ptr.dtype.element_ty).to(tl.float32)  # the reference's div_
        ms = tl.sum(x * x, axis=1) / hidden
        rstd = tl.rsqrt(ms + eps)
        g = tl.load(g_ptr + c, mask=cmask, other=0.0).to(tl.float32)
        y = x * rstd[:, None] * g[None, :]
        tl.store(x_ptr + offs, y.to(x_ptr.dtype.element_ty), mask=mask)


@torch.no_grad()
def solution(rs_input_1d: Tensor, gamma: Tensor, eps: float) -> Tensor:
    world_size = dist.get_world_size()
    n = rs_input_1d.numel()
    chunk = n // world_size
    hidden = gamma.numel()
    assert chunk % hidden == 0, f"chunk ({chunk}) must divide hidden ({hidden})"
    rows = chunk // hidden

    out_flat = torch.empty(chunk, dtype=rs_input_1d.dtype, device=rs_input_1d.device)
    dist.reduce_scatter_tensor(out_flat, rs_input_1d.contiguous(), op=dist.ReduceOp.SUM)

    if not out_flat.is_cuda:  # CPU check: the reference's math
        x = out_flat.div_(world_size).view(rows, hidden).float()
        rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True).add(eps))
        return (x * rms * gamma.float()).to(rs_input_1d.dtype)

    block_h = triton.next_power_of_2(hidden)
    block_r = max(1, min(16, 8192 // block_h))
    grid = (triton.cdiv(rows, block_r),)
    _avg_rmsnorm_kernel[grid](out_flat, gamma.contiguous(), rows, hidden, 1.0 / world_size,
                              float(eps), BLOCK_R=block_r, BLOCK_H=block_h, num_warps=4)
    return out_flat.view(rows, hidden)
