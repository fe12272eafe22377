import torch
import torch.distributed as dist
import torch.nn.functional as F

HEAD_DIM = 128


def _seq_to_head(t, world):
    s, hd = t.shape
    h = hd // HEAD_DIM
    t = t.view(s, world, h // world, HEAD_DIM).permute(1, 0, 2, 3).contiguous()
    out = torch.empty_like(t)
    dist.all_to_all_single(out, t)  # expect: nccl_payload hot
    return out.view(world * s, h // world, HEAD_DIM)


def _head_to_seq(t, world):
    S, hl, dh = t.shape
    t = t.view(world, S // world, hl, dh).contiguous()
    out = torch.empty_like(t)
    dist.all_to_all_single(out, t)  # expect: nccl_payload hot
    return out.permute(1, 0, 2, 3).reshape(S // world, world * hl * dh)


def solution(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    heads = q.shape[1] // HEAD_DIM
    # every rank must hold the same head layout
    hc = torch.tensor([heads, heads % world], dtype=torch.int32, device=q.device)
    all_hc = torch.empty(2 * world, dtype=torch.int32, device=q.device)
    dist.all_gather_into_tensor(all_hc, hc)  # expect: nccl_metadata hot

    qh, kh, vh = (_seq_to_head(t, world) for t in (q, k, v))
    o = F.scaled_dot_product_attention(qh.transpose(0, 1), kh.transpose(0, 1), vh.transpose(0, 1))
    return _head_to_seq(o.transpose(0, 1).contiguous(), world)
