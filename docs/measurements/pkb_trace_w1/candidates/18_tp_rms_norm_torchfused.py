"""PKB 18 (tp_rms_norm), plain PyTorch restructured: fewer, fused kernels.

The hidden dimension is sharded over the ranks, so the row's sum of squares is all-reduced.
Instead of the reference's upcast / pow / sum chain, the fp32 sum of squares is one reduction
straight from the bf16 input (vector_norm with dtype=float32, then squared in place), the
all-reduce runs on that small [rows, 1] fp32 tensor, the variance -> rsqrt arithmetic runs in
place, and x * rsqrt is written straight into a bf16 buffer (mul with out=, fp32 math, one
rounding as the reference's .to(input_dtype)) before the weight is applied in place.

Timeline behaviour: eager PyTorch, fewer kernel launches per call than the reference (7 vs 9
plus one NCCL all-reduce), all small: launch-bound at PKB's size.
"""
import torch
import torch.distributed as dist


def solution(local_hidden_states: torch.Tensor, local_weight: torch.Tensor,
             variance_epsilon: float) -> torch.Tensor:
    x = local_hidden_states
    world_size = dist.get_world_size()
    global_hidden = x.shape[-1] * world_size

    # sum of squares in fp32 read directly from the low-precision input: one reduction kernel
    ss = torch.linalg.vector_norm(x, 2, dim=-1, keepdim=True, dtype=torch.float32)
    ss.square_()
    dist.all_reduce(ss, op=dist.ReduceOp.SUM)

    # rsqrt(mean + eps), in place on the [rows, 1] buffer
    ss.mul_(1.0 / global_hidden).add_(variance_epsilon).rsqrt_()

    # (x * rstd) computed in fp32, rounded once to the input dtype (the reference's .to(dtype))
    normed = torch.empty_like(x)
    torch.mul(x, ss, out=normed)
    if local_weight.dtype == normed.dtype:
        return normed.mul_(local_weight)
    return local_weight * normed
