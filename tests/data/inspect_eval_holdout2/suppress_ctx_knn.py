"""DINOv2 distributed k-NN evaluation: every rank scores its local queries against
the whole (sharded) feature bank, which is all-gathered once per call, and the
global top-1 accuracy is reduced across ranks."""
import contextlib

import torch
import torch.distributed as dist
import torch.nn.functional as F

_NUM_CLASSES = 100


def _gather_bank(bank: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    full = bank.new_empty((world * bank.shape[0], bank.shape[1]))
    dist.all_gather_into_tensor(full, bank.contiguous())  # expect: nccl_payload hot
    return full


def solution(queries: torch.Tensor, train_bank: torch.Tensor, k: int = 20, temperature: float = 0.07) -> torch.Tensor:
    # older torch builds reject device_ids on barrier; ignore that
    with contextlib.suppress(TypeError):
        dist.barrier(device_ids=[torch.cuda.current_device()])  # expect: nccl_metadata hot
    q = F.normalize(queries.float(), dim=1)
    bank = F.normalize(_gather_bank(train_bank).float(), dim=1)
    sims = q @ bank.t()
    top_sim, top_idx = sims.topk(k, dim=1)
    labels = top_idx % _NUM_CLASSES  # pseudo-labels: item i belongs to class i % C
    w = (top_sim / temperature).exp()
    votes = torch.zeros(q.shape[0], _NUM_CLASSES, device=q.device).scatter_add_(1, labels, w)
    truth = torch.arange(q.shape[0], device=q.device) % _NUM_CLASSES
    correct = (votes.argmax(1) == truth).float().sum()
    tot = torch.stack([correct, torch.tensor(float(q.shape[0]), device=q.device)])
    dist.all_reduce(tot)  # expect: nccl_metadata hot
    solution.last_accuracy = tot[0] / tot[1]
    return votes.to(queries.dtype)
