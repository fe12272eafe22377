"""Megatron vocab-parallel cross entropy (forward only), under inference_mode.
Logits are sharded over the vocabulary: a MAX all-reduce for stability, then one
SUM all-reduce for the target logit and the partition function together."""
import torch
import torch.distributed as dist


def _vocab_range(per_rank: int, rank: int):
    return rank * per_rank, (rank + 1) * per_rank


@torch.inference_mode()
def solution(vocab_parallel_logits: torch.Tensor, target: torch.Tensor, label_smoothing: float = 0.0) -> torch.Tensor:
    rank, world = dist.get_rank(), dist.get_world_size()
    logits = vocab_parallel_logits.float()
    vmax = logits.max(dim=-1).values
    dist.all_reduce(vmax, op=dist.ReduceOp.MAX)  # expect: nccl_payload hot
    logits = logits - vmax[:, None]
    start, end = _vocab_range(logits.shape[-1], rank)
    tgt = (target[:, 0].float().abs() * 977).long() % (logits.shape[-1] * world)
    outside = (tgt < start) | (tgt >= end)
    local_t = (tgt - start).masked_fill(outside, 0)
    pred = logits.gather(1, local_t[:, None]).squeeze(1).masked_fill(outside, 0.0)
    sum_exp = logits.exp().sum(dim=-1)
    both = torch.stack([pred, sum_exp])
    dist.all_reduce(both)  # expect: nccl_payload hot
    loss = torch.log(both[1]) - both[0]
    if label_smoothing > 0.0:
        sum_logits = logits.sum(dim=-1)
        dist.all_reduce(sum_logits)  # expect: nccl_payload fallback
        mean_log_prob = sum_logits / (logits.shape[-1] * world) - torch.log(both[1])
        loss = (1.0 - label_smoothing) * loss - label_smoothing * mean_log_prob
    return loss.to(vocab_parallel_logits.dtype)
