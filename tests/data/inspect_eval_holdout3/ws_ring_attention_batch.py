import math

import torch
import torch.distributed as dist


def _attn_block(q, k, v, scale):
    s = (q.float() @ k.float().t()) * scale
    m = s.amax(dim=-1)
    p = torch.exp(s - m.unsqueeze(1))
    return p @ v.float(), m, p.sum(dim=-1)


def solution(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    rank = dist.get_rank()
    scale = 1.0 / math.sqrt(q.shape[1])
    if world == 1:
        o, _, l = _attn_block(q, k, v, scale)
        return (o / l.unsqueeze(1)).to(q.dtype)
    if world <= 2:
        ks = [torch.empty_like(k) for _ in range(world)]
        vs = [torch.empty_like(v) for _ in range(world)]
        dist.all_gather(ks, k)  # expect: nccl_payload fallback
        dist.all_gather(vs, v)  # expect: nccl_payload fallback
        o, _, l = _attn_block(q, torch.cat(ks), torch.cat(vs), scale)
        return (o / l.unsqueeze(1)).to(q.dtype)

    send_to, recv_from = (rank + 1) % world, (rank - 1) % world
    kv = torch.stack([k, v]).contiguous()
    o_acc = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    m_acc = torch.full((q.shape[0],), -float("inf"), device=q.device)
    l_acc = torch.zeros(q.shape[0], device=q.device)
    for step in range(world):
        if step < world - 1:
            nxt = torch.empty_like(kv)
            ops = [dist.P2POp(dist.isend, kv, send_to), dist.P2POp(dist.irecv, nxt, recv_from)]
            reqs = dist.batch_isend_irecv(ops)  # expect: nccl_payload hot
        o, m, l = _attn_block(q, kv[0], kv[1], scale)
        m_new = torch.maximum(m_acc, m)
        a, b = torch.exp(m_acc - m_new), torch.exp(m - m_new)
        o_acc = o_acc * a.unsqueeze(1) + o * b.unsqueeze(1)
        l_acc = l_acc * a + l * b
        m_acc = m_new
        if step < world - 1:
            for r in reqs:
                r.wait()
            kv = nxt
    # log-sum-exp of every query row, gathered for the backward pass
    lse = (m_acc + l_acc.log()).contiguous()
    lse_all = torch.empty(world * lse.numel(), device=q.device)
    dist.all_gather_into_tensor(lse_all, lse)  # expect: nccl_payload hot
    return (o_acc / l_acc.unsqueeze(1)).to(q.dtype)
