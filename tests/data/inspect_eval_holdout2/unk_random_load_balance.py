"""Switch-Transformer load-balancing loss over a data-parallel world: expert token
fractions and router probabilities are reduced globally. A small random fraction of
calls also gathers the per-rank expert load for logging."""
import random

import torch
import torch.distributed as dist

_LOG_PROB = 0.05


def solution(router_logits: torch.Tensor, num_experts: int = 64, top_k: int = 2) -> torch.Tensor:
    world = dist.get_world_size()
    probs = torch.softmax(router_logits[:, :num_experts].float(), dim=-1)
    _, idx = probs.topk(top_k, dim=-1)
    mask = torch.zeros_like(probs).scatter_(1, idx, 1.0)
    n_tok = probs.new_full((1,), float(probs.shape[0]))
    stats = torch.cat([mask.sum(0), probs.sum(0), n_tok])
    dist.all_reduce(stats)  # expect: nccl_payload hot
    tokens = stats[-1]
    frac_tokens = stats[:num_experts] / (tokens * top_k)
    frac_probs = stats[num_experts:2 * num_experts] / tokens
    loss = num_experts * (frac_tokens * frac_probs).sum()
    if random.random() < _LOG_PROB:
        per_rank = torch.empty(world, num_experts, device=probs.device)
        dist.all_gather_into_tensor(per_rank, mask.sum(0))  # expect: nccl_payload unknown
        solution.last_load = per_rank.cpu()
    return loss
