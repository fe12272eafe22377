"""PKB 45 (reducescatter_fused_rmsnorm), plain PyTorch restructured: one fused RMSNorm.

NCCL reduce-scatters the flat input; the reference then divides by the world size in place and
runs the RMSNorm as a chain of fp32 ops. The average's 1/W cancels inside the norm:
(x/W) * rsqrt(mean((x/W)^2) + eps) == x * rsqrt(mean(x^2) + eps * W^2), so the division is
dropped and the whole norm (fp32 statistics, gamma, cast back) is one call to
torch.nn.functional.rms_norm with eps * W^2, a single fused kernel on CUDA.

Timeline behaviour: eager PyTorch, one NCCL reduce-scatter plus one compute kernel per call
(the reference: reduce-scatter plus about eight small kernels).
"""
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor


@torch.no_grad()
def solution(rs_input_1d: Tensor, gamma: Tensor, eps: float) -> Tensor:
    world_size = dist.get_world_size()
    hidden = gamma.numel()
    chunk = rs_input_1d.numel() // world_size
    assert chunk % hidden == 0, f"chunk ({chunk}) must divide hidden ({hidden})"

    out_flat = torch.empty(chunk, dtype=rs_input_1d.dtype, device=rs_input_1d.device)
    dist.reduce_scatter_tensor(out_flat, rs_input_1d.contiguous(), op=dist.ReduceOp.SUM)

    # mean over ranks folded into eps: no separate div_ kernel
    x = out_flat.view(chunk // hidden, hidden)
    return F.rms_norm(x, (hidden,), gamma, eps * world_size * world_size)
