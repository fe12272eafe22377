import torch
import torch.distributed as dist


def _token_logprobs(logits, labels):
    logp = torch.log_softmax(logits.float(), dim=-1)
    return logp.gather(-1, labels.unsqueeze(-1)).squeeze(-1)


def solution(logits: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor) -> torch.Tensor:
    clip_eps = 0.2
    labels = logits.argmax(dim=-1)
    cur = _token_logprobs(logits, labels)
    old = old_logprobs.float().mean(dim=-1)
    mask = (advantages.float().abs().sum(dim=-1) > 0).float()

    ratio = torch.exp(cur - old)
    adv = advantages.float().mean(dim=-1)
    unclipped = ratio * adv
    clipped = ratio.clamp(1 - clip_eps, 1 + clip_eps) * adv
    per_token = -torch.minimum(unclipped, clipped) * mask

    # global loss sum and token count: one element each
    loss_sum = per_token.sum()
    n_tokens = mask.sum()
    dist.all_reduce(loss_sum)  # expect: nccl_metadata hot
    dist.all_reduce(n_tokens)  # expect: nccl_metadata hot

    # KL diagnostic per token: sized by the batch
    kl = (old - cur).float()
    kl_all = torch.empty(dist.get_world_size() * kl.numel(), device=kl.device)
    dist.all_gather_into_tensor(kl_all, kl.contiguous())  # expect: nccl_payload hot

    stats = torch.stack([ratio.mean(), kl_all.mean(), (ratio - 1).abs().max()])
    dist.all_reduce(stats, op=dist.ReduceOp.MAX)  # expect: nccl_metadata hot
    loss = loss_sum / n_tokens.clamp_min(1.0)
    return (loss + 0.0 * stats.sum()).to(logits.dtype)
