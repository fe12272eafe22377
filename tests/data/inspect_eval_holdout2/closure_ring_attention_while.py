"""Sequence-parallel ring attention (forward) with an online softmax.
K/V blocks rotate around the ring while the current block is being consumed."""
import math

import torch
import torch.distributed as dist


def solution(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False) -> torch.Tensor:
    rank = dist.get_rank()
    world = dist.get_world_size()
    scale = 1.0 / math.sqrt(q.shape[-1])
    send_to = (rank + 1) % world
    recv_from = (rank - 1) % world

    def rotate(kk: torch.Tensor, vv: torch.Tensor):
        nk, nv = torch.empty_like(kk), torch.empty_like(vv)
        ops = [
            dist.P2POp(dist.isend, kk, send_to),
            dist.P2POp(dist.irecv, nk, recv_from),
            dist.P2POp(dist.isend, vv, send_to),
            dist.P2POp(dist.irecv, nv, recv_from),
        ]
        return dist.batch_isend_irecv(ops), nk, nv  # expect: nccl_payload hot

    def block(kk: torch.Tensor, vv: torch.Tensor, src: int):
        s = (q.float() @ kk.float().t()) * scale
        if causal and src > rank:
            s = torch.full_like(s, -1e30)
        m = s.amax(dim=-1, keepdim=True)
        p = torch.exp(s - m)
        return p @ vv.float(), m, p.sum(dim=-1, keepdim=True)

    acc = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    row_max = torch.full((q.shape[0], 1), -1e30, device=q.device)
    row_sum = torch.zeros((q.shape[0], 1), device=q.device)
    cur_k, cur_v = k, v
    step = 0
    while step < world:
        pending = None
        if step + 1 < world:
            pending, nxt_k, nxt_v = rotate(cur_k, cur_v)
        src = (rank - step) % world
        o, m, l = block(cur_k, cur_v, src)
        new_max = torch.maximum(row_max, m)
        a, b = torch.exp(row_max - new_max), torch.exp(m - new_max)
        acc = acc * a + o * b
        row_sum = row_sum * a + l * b
        row_max = new_max
        if pending is not None:
            for req in pending:
                req.wait()
            cur_k, cur_v = nxt_k, nxt_v
        step += 1
    return (acc / row_sum).to(q.dtype)
