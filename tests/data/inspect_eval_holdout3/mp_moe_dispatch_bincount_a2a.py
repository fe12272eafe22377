import torch
import torch.distributed as dist
import torch.nn.functional as F


def _route(x, router_w, top_k=2):
    logits = x.float() @ router_w.float()
    probs = logits.softmax(dim=-1)
    scores, experts = torch.topk(probs, top_k, dim=-1)
    return scores, experts


def solution(x: torch.Tensor, router_w: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    num_experts = router_w.shape[1]
    per_rank = max(num_experts // world, 1)
    scores, experts = _route(x, router_w)

    # load statistics for the aux loss: one bin per expert, sized by router_w
    tokens_per_expert = torch.bincount(experts.flatten(), minlength=num_experts)
    dist.all_reduce(tokens_per_expert)  # expect: nccl_payload hot

    dest = (experts[:, 0] // per_rank).clamp(max=world - 1)
    order = torch.argsort(dest, stable=True)
    send_tokens = x.index_select(0, order).contiguous()

    # token counts first: W integers
    send_counts = torch.bincount(dest, minlength=world)
    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts)  # expect: nccl_metadata hot

    in_splits = send_counts.tolist()
    out_splits = recv_counts.tolist()
    recv_tokens = send_tokens.new_empty((sum(out_splits), x.shape[1]))
    dist.all_to_all_single(recv_tokens, send_tokens, out_splits, in_splits)  # expect: nccl_payload hot

    hidden = F.silu(recv_tokens.float()).to(x.dtype)

    back = torch.empty_like(send_tokens)
    dist.all_to_all_single(back, hidden, in_splits, out_splits)  # expect: nccl_payload hot
    out = torch.empty_like(x)
    out.index_copy_(0, order, back)
    aux = tokens_per_expert.float().pow(2).mean() / max(x.shape[0], 1)
    return out * scores[:, :1].to(x.dtype) + aux.to(x.dtype)
