"""Clipped importance-sampling (PPO-style) loss normalised by the global number of
valid tokens. Tokens with zero advantage are padding and do not count."""
import torch
import torch.distributed as dist


@torch.no_grad()
def solution(log_probs: torch.Tensor, old_log_probs: torch.Tensor, advantages: torch.Tensor,
             clip_eps: float = 0.2) -> torch.Tensor:
    world = dist.get_world_size()
    adv = advantages.float()
    ratio = torch.exp(log_probs.float() - old_log_probs.float())
    surrogate = torch.minimum(ratio * adv, ratio.clamp(1.0 - clip_eps, 1.0 + clip_eps) * adv)
    valid = adv != 0
    stats = torch.stack([-(surrogate * valid).sum(), valid.sum().float()])
    dist.all_reduce(stats, op=dist.ReduceOp.SUM)  # expect: nccl_metadata hot

    if stats[1].item() > 0:
        denom = stats[1:2].clone()
    else:
        # no valid token on any rank: fall back to the global token count, agreed on rank 0
        denom = torch.tensor([float(adv.numel() * world)], device=adv.device)
        dist.broadcast(denom, src=0)  # expect: nccl_metadata unknown
    loss = stats[0] / denom[0]
    return loss.to(log_probs.dtype)
