"""FP8 parameter all-gather: each rank quantises its shard to e4m3 with one scale per
row, gathers payload and scales, and dequantises. A small random fraction of calls is
checked against a full-precision gather."""
import random

import torch
import torch.distributed as dist

_FP8 = torch.float8_e4m3fn
_FP8_MAX = torch.finfo(_FP8).max
_CHECK_PROB = 0.01


def _quantize(x: torch.Tensor):
    amax = x.float().abs().amax(dim=-1, keepdim=True).clamp_(min=1e-12)
    scale = amax / _FP8_MAX
    q = (x.float() / scale).clamp_(-_FP8_MAX, _FP8_MAX).to(_FP8)
    return q, scale


@torch.no_grad()
def solution(param_shard: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    rows, cols = param_shard.shape
    q, scale = _quantize(param_shard)
    q_all = torch.empty((world * rows, cols), dtype=torch.uint8, device=param_shard.device)
    s_all = torch.empty((world * rows, 1), dtype=torch.float32, device=param_shard.device)
    dist.all_gather_into_tensor(q_all, q.view(torch.uint8))  # expect: nccl_payload hot
    dist.all_gather_into_tensor(s_all, scale)  # expect: nccl_payload hot
    out = (q_all.view(_FP8).float() * s_all).to(param_shard.dtype)

    if random.random() < _CHECK_PROB:
        ref = torch.empty_like(out)
        dist.all_gather_into_tensor(ref, param_shard.contiguous())  # expect: nccl_payload unknown
        err = ((out.float() - ref.float()).abs().max() / ref.float().abs().max().clamp(min=1e-6)).reshape(1)
        dist.all_reduce(err, op=dist.ReduceOp.MAX)  # expect: nccl_metadata unknown
        if dist.get_rank() == 0 and err.item() > 0.07:
            print(f"[fp8 all-gather] relative error {err.item():.4f}")
    return out
