"""FP8 gradient reduce-scatter: a globally agreed per-tensor scale, an e4m3
payload exchanged with all_to_all, and an fp32 sum on the owner. Degenerate
scales (all zeros or non-finite) send the bf16 gradient instead."""
import torch
import torch.distributed as dist

_E4M3_MAX = 448.0


def solution(grad: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    rows = grad.shape[0] // world
    amax = grad.abs().amax().float().reshape(1)
    dist.all_reduce(amax, op=dist.ReduceOp.MAX)  # expect: nccl_metadata hot
    if amax.item() == 0.0 or not torch.isfinite(amax).item():
        out = torch.empty((rows, grad.shape[1]), dtype=grad.dtype, device=grad.device)
        dist.reduce_scatter_tensor(out, grad.contiguous())  # expect: nccl_payload unknown
    else:
        scale = _E4M3_MAX / amax
        q = (grad.float() * scale).clamp(-_E4M3_MAX, _E4M3_MAX).to(torch.float8_e4m3fn)
        recv = torch.empty_like(q)
        dist.all_to_all_single(recv.view(torch.uint8), q.view(torch.uint8))  # expect: nccl_payload unknown
        out = (recv.float().view(world, rows, grad.shape[1]).sum(0) / scale).to(grad.dtype)
    out = out / world
    nonfinite = (~torch.isfinite(out)).sum().float()
    dist.all_reduce(nonfinite)  # expect: nccl_metadata hot
    solution.nonfinite = nonfinite
    return out
