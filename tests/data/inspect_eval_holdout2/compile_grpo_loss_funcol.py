"""NeMo-RL style GRPO clipped policy loss, normalised by the global token count.
The surrogate and the global sum are torch.compile'd helpers."""
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol


@torch.compile(dynamic=False)
def _clipped_surrogate(logp, old_logp, adv, eps_low: float, eps_high: float):
    ratio = torch.exp(logp - old_logp)
    clipped = torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high)
    return -torch.minimum(ratio * adv, clipped * adv)


@torch.compile
def _global_sum(t: torch.Tensor) -> torch.Tensor:
    return funcol.all_reduce(t, "sum", dist.group.WORLD)  # expect: nccl_metadata hot


def _kl_penalty(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    d = ref_logp - logp
    return torch.exp(d) - d - 1.0


def solution(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    ref_logprobs: torch.Tensor,
    eps_clip: float = 0.2,
    kl_coef: float = 0.0,
) -> torch.Tensor:
    lp = logprobs.float()
    mask = torch.ones_like(lp)
    per_tok = _clipped_surrogate(lp, old_logprobs.float(), advantages.float(), eps_clip, eps_clip)
    if kl_coef > 0.0:
        kl = _kl_penalty(lp, ref_logprobs.float())
        per_tok = per_tok + kl_coef * kl
        kl_sum = (kl * mask).sum()
        dist.all_reduce(kl_sum)  # expect: nccl_metadata fallback
        solution.last_kl = kl_sum
    local = torch.stack([(per_tok * mask).sum(), mask.sum()])
    tot = _global_sum(local)
    n_seq = torch.tensor([float(lp.shape[0])], device=lp.device)
    dist.all_reduce(n_seq)  # expect: nccl_metadata hot
    solution.tokens_per_seq = tot[1] / n_seq[0]
    return tot[0] / tot[1].clamp_min(1.0)
