import torch
import torch.distributed as dist

NUM_EXPERTS = 64
TOP_K = 2


def solution(x: torch.Tensor, gate_w: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    logits = x.float() @ gate_w.float()[:, :NUM_EXPERTS]
    probs = logits.softmax(dim=-1)
    topv, topi = probs.topk(TOP_K, dim=-1)

    # global expert load, NUM_EXPERTS bins
    load = torch.bincount(topi.flatten(), minlength=NUM_EXPERTS).float()
    dist.all_reduce(load)  # expect: nccl_metadata hot

    # router entropy per token: one entry per row of x
    ent = -(probs * probs.clamp_min(1e-9).log()).sum(dim=-1)
    ent_all = torch.empty(world * ent.numel(), device=x.device)
    dist.all_gather_into_tensor(ent_all, ent)  # expect: nccl_payload hot

    # confidence histogram without minlength: its length follows the data
    slot = (topv[:, 0] * 1000).long()
    slot_hist = torch.bincount(slot)
    dist.all_reduce(slot_hist)  # expect: nccl_payload hot

    aux = NUM_EXPERTS * (load / load.sum()).pow(2).sum()
    gated = x.float() * topv.sum(dim=1, keepdim=True)
    return (gated + 0.0 * aux + 0.0 * ent_all.mean() + 0.0 * slot_hist.sum()).to(x.dtype)
