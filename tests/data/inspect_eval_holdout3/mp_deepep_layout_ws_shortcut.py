import torch
import torch.distributed as dist

TOP_K = 4


def _layout(topk_idx: torch.Tensor, world: int, experts_per_rank: int):
    rank_of = topk_idx // experts_per_rank
    per_rank = torch.zeros(world, dtype=torch.int32, device=topk_idx.device)
    for k in range(TOP_K):
        per_rank.add_(torch.bincount(rank_of[:, k], minlength=world).int())
    return rank_of, per_rank


def solution(x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    if world == 1:
        return x * gate.float().softmax(-1).amax(-1, keepdim=True).to(x.dtype)
    if world <= 2:
        # tiny jobs: replicate every token instead of dispatching
        full = torch.empty((world * x.shape[0], x.shape[1]), dtype=x.dtype, device=x.device)
        dist.all_gather_into_tensor(full, x)  # expect: nccl_payload fallback
        return full[: x.shape[0]]

    experts_per_rank = max(gate.shape[1] // world, 1)
    _, topk_idx = gate.float().topk(TOP_K, dim=-1)
    rank_of, per_rank = _layout(topk_idx, world, experts_per_rank)

    # DeepEP-style layout: everybody learns everybody's per-rank counts
    layout = torch.empty(world * world, dtype=torch.int32, device=x.device)
    dist.all_gather_into_tensor(layout, per_rank)  # expect: nccl_metadata hot
    layout = layout.view(world, world)
    rank = dist.get_rank()
    recv_counts = layout[:, rank].tolist()
    send_counts = per_rank.tolist()

    flat_dest = rank_of.flatten()
    order = torch.argsort(flat_dest, stable=True)
    send = x.repeat_interleave(TOP_K, dim=0)[order].contiguous()
    recv = send.new_empty((sum(recv_counts), x.shape[1]))
    dist.all_to_all_single(recv, send, recv_counts, send_counts)  # expect: nccl_payload hot

    out = torch.empty_like(send)
    dist.all_to_all_single(out, recv * 2, send_counts, recv_counts)  # expect: nccl_payload hot
    combined = torch.zeros_like(send)
    combined[order] = out
    return combined.view(x.shape[0], TOP_K, -1).sum(1)
