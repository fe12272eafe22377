"""Ring attention: K/V blocks rotate around the ring with batched isend/irecv while
the current block is folded into an online-softmax accumulator."""
import torch
import torch.distributed as dist


class _Ring:
    def __init__(self, group=None):
        self.group = group or dist.group.WORLD
        self.rank = dist.get_rank(self.group)
        self.world = dist.get_world_size(self.group)
        self.nxt = dist.get_global_rank(self.group, (self.rank + 1) % self.world)
        self.prv = dist.get_global_rank(self.group, (self.rank - 1) % self.world)

    def exchange(self, k: torch.Tensor, v: torch.Tensor):
        nk, nv = torch.empty_like(k), torch.empty_like(v)
        ops = [
            dist.P2POp(dist.isend, k, self.nxt, self.group),
            dist.P2POp(dist.irecv, nk, self.prv, self.group),
            dist.P2POp(dist.isend, v, self.nxt, self.group),
            dist.P2POp(dist.irecv, nv, self.prv, self.group),
        ]
        return dist.batch_isend_irecv(ops), nk, nv  # expect: nccl_payload hot


def _dense(q, k, v, scale):
    p = torch.softmax((q.float() @ k.float().T) * scale, dim=-1)
    return (p @ v.float()).to(q.dtype)


@torch.no_grad()
def solution(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    ring = _Ring()
    scale = q.shape[-1] ** -0.5
    if ring.world == 1:
        return _dense(q, k, v, scale)

    qf = q.float() * scale
    m = torch.full((q.shape[0], 1), float("-inf"), device=q.device)
    l = torch.zeros_like(m)
    acc = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    k, v = k.contiguous(), v.contiguous()
    for step in range(ring.world):
        last = step == ring.world - 1
        if not last:
            reqs, nk, nv = ring.exchange(k, v)
        s = qf @ k.float().T
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        p = torch.exp(s - m_new)
        corr = torch.exp(m - m_new)
        l = l * corr + p.sum(dim=-1, keepdim=True)
        acc = acc * corr + p @ v.float()
        m = m_new
        if not last:
            for r in reqs:
                r.wait()
            k, v = nk, nv
    return (acc / l).to(q.dtype)
