import torch
import torch.distributed as dist

NUM_KEYS = 26


def solution(values: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    dev = values.device
    vals = values.flatten().float()
    wts = weights.flatten().float()
    n = vals.numel()

    # KJT layout: per (rank, key) lengths, NUM_KEYS * W int32
    key_of = (vals.abs() * 1e3).long() % NUM_KEYS
    dest = (vals.abs() * 7e3).long() % world
    slot = dest * NUM_KEYS + key_of
    lengths = torch.bincount(slot, minlength=NUM_KEYS * world).to(torch.int32)
    recv_lengths = torch.empty_like(lengths)
    dist.all_to_all_single(recv_lengths, lengths)  # expect: nccl_metadata hot

    order = torch.argsort(slot, stable=True)
    in_splits = lengths.view(world, NUM_KEYS).sum(dim=1).tolist()
    out_splits = recv_lengths.view(world, NUM_KEYS).sum(dim=1).tolist()
    out_vals = vals.new_empty(sum(out_splits))
    out_wts = wts.new_empty(sum(out_splits))
    dist.all_to_all_single(out_vals, vals[order], out_splits, in_splits)  # expect: nccl_payload hot
    dist.all_to_all_single(out_wts, wts[order], out_splits, in_splits)  # expect: nccl_payload hot

    # per-key pooled sums: NUM_KEYS entries, filled in place
    contrib = out_vals * out_wts
    pooled = torch.zeros(NUM_KEYS, device=dev)
    pooled.index_add_(0, (out_vals.abs() * 1e3).long() % NUM_KEYS, contrib)
    dist.all_reduce(pooled)  # expect: nccl_metadata hot
    return (values.float() * pooled.sum() / max(n, 1)).to(values.dtype)
