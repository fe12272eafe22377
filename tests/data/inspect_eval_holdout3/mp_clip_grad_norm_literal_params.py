import torch
import torch.distributed as dist

MAX_NORM = 1.0


def solution(w_grad: torch.Tensor, b_grad: torch.Tensor, emb_grad: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    grads = [w_grad, b_grad, emb_grad]

    # data-parallel mean of every gradient: full tensors
    for g in grads:
        dist.all_reduce(g)  # expect: nccl_payload hot
        g.div_(world)

    # squared norms, one scalar per entry of a 3-element literal list
    sq = torch.stack([(g.float() * g.float()).sum() for g in grads])
    dist.all_reduce(sq)  # expect: nccl_metadata hot
    total = sq.sum().sqrt()

    # per-row norms of the embedding gradient: one entry per row
    row_norms = emb_grad.float().norm(dim=1)
    dist.all_reduce(row_norms, op=dist.ReduceOp.MAX)  # expect: nccl_payload hot

    inf_norm = torch.stack([g.abs().amax() for g in grads]).float()
    dist.all_reduce(inf_norm, op=dist.ReduceOp.MAX)  # expect: nccl_metadata hot

    coef = (MAX_NORM / (total + 1e-6)).clamp(max=1.0)
    torch._foreach_mul_(grads, coef)
    row_scale = (row_norms.max() / row_norms.clamp_min(1e-6)).clamp(max=4.0)
    return w_grad * row_scale.mean().to(w_grad.dtype) + inf_norm.max().to(w_grad.dtype)
