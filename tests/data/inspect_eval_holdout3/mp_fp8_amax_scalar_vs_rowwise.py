import torch
import torch.distributed as dist

FP8_MAX = 448.0


def _quant(x, scale):
    return (x.float() * scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)


def solution(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    # per-tensor scale for the activations: one element
    amax = x.abs().amax().float()
    dist.all_reduce(amax, op=dist.ReduceOp.MAX)  # expect: nccl_metadata hot
    scale = FP8_MAX / amax.clamp_min(1e-12)

    # per-row scales for the weight: one per row
    w_amax = w.abs().amax(dim=-1).float()
    w_amax_all = torch.empty(world * w_amax.numel(), device=w.device)
    dist.all_gather_into_tensor(w_amax_all, w_amax)  # expect: nccl_payload hot
    w_amax = w_amax_all.view(world, -1).amax(dim=0)

    xq = _quant(x, scale)
    gathered = torch.empty((world * x.shape[0], x.shape[1]), dtype=torch.uint8, device=x.device)
    dist.all_gather_into_tensor(gathered, xq.view(torch.uint8))  # expect: nccl_payload hot

    full = gathered.view(torch.float8_e4m3fn).float() / scale
    w_scale = (FP8_MAX / w_amax.clamp_min(1e-12)).unsqueeze(1)
    wq = _quant(w, w_scale).float() / w_scale
    y = full @ wq.t()
    return y.to(x.dtype)[: x.shape[0]]
