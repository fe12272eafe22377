import torch
import torch.distributed as dist


def solution(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    rank = dist.get_rank()
    vocab_local = logits.shape[1]
    lo = rank * vocab_local
    lf = logits.float()
    tgt = targets.float().abs().sum(dim=1).long() % (vocab_local * dist.get_world_size())

    row_max = lf.amax(dim=-1)
    dist.all_reduce(row_max, op=dist.ReduceOp.MAX)  # expect: nccl_payload hot
    shifted = lf - row_max.unsqueeze(1)
    sum_exp = shifted.exp().sum(dim=-1)
    dist.all_reduce(sum_exp)  # expect: nccl_payload hot

    in_shard = (tgt >= lo) & (tgt < lo + vocab_local)
    local_idx = (tgt - lo).clamp(0, vocab_local - 1)
    tgt_logit = shifted.gather(1, local_idx.unsqueeze(1)).squeeze(1) * in_shard
    dist.all_reduce(tgt_logit)  # expect: nccl_payload hot
    logprob = tgt_logit - sum_exp.log()

    # scalar summaries for logging
    n_valid = int(in_shard.sum())
    summary = torch.tensor([float(n_valid), float(logprob.mean())], device=logits.device)
    dist.all_reduce(summary)  # expect: nccl_metadata hot
    p = shifted.softmax(dim=-1)
    entropy = -(p * p.clamp_min(1e-20).log()).sum()
    dist.all_reduce(entropy)  # expect: nccl_metadata hot
    extra = (summary.sum() + entropy).to(logits.dtype)
    return logprob.to(logits.dtype).unsqueeze(1).expand_as(logits) + 0 * extra
