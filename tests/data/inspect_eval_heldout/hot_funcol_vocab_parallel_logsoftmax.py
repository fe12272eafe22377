"""Vocab-parallel log-softmax: logits are sharded along the vocabulary, so the row
max and the sum of exponentials are reduced across ranks with functional
collectives (traceable, no in-place mutation)."""
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol


def _reduce_max_exact(t: torch.Tensor) -> torch.Tensor:
    t = torch.ops._c10d_functional.all_reduce(t, "max", dist.group.WORLD.group_name)  # expect: nccl_payload fallback
    return torch.ops._c10d_functional.wait_tensor(t)


@torch.no_grad()
def solution(vocab_parallel_logits: torch.Tensor) -> torch.Tensor:
    group = dist.group.WORLD
    logits = vocab_parallel_logits
    if not logits.is_floating_point():
        logits = logits.float()
        row_max = _reduce_max_exact(logits.amax(dim=-1, keepdim=True))
    else:
        row_max = funcol.all_reduce(logits.float().amax(dim=-1, keepdim=True), "max", group)  # expect: nccl_payload hot
    shifted = logits.float() - row_max
    sum_exp = funcol.all_reduce(shifted.exp().sum(dim=-1, keepdim=True), "sum", group)  # expect: nccl_payload hot
    log_probs = shifted - sum_exp.log()
    return log_probs.to(vocab_parallel_logits.dtype)
