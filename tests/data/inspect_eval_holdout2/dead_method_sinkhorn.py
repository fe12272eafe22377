"""DINOv2 distributed Sinkhorn-Knopp centering of teacher logits. The batch is
sharded across ranks, so every normalisation over the batch axis is all-reduced."""
import torch
import torch.distributed as dist


class _Sinkhorn:
    def __init__(self, n_iters: int = 3, temp: float = 0.05):
        self.n_iters = n_iters
        self.temp = temp

    def _sum_rows(self, q: torch.Tensor) -> torch.Tensor:
        s = q.sum(dim=1, keepdim=True)
        dist.all_reduce(s)  # expect: nccl_payload hot
        return s

    def _global_count(self, q: torch.Tensor) -> torch.Tensor:
        b = torch.tensor([q.shape[1]], device=q.device, dtype=torch.float32)
        dist.all_reduce(b)  # expect: nccl_metadata hot
        return b

    def debug_dump(self, q: torch.Tensor):
        stats = [None] * dist.get_world_size()
        dist.all_gather_object(stats, (q.min().item(), q.max().item()))  # expect: nccl_metadata fallback
        return stats

    def _gather_cols(self, q: torch.Tensor) -> torch.Tensor:
        parts = [torch.empty_like(q) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, q)  # expect: nccl_payload fallback
        return torch.cat(parts, 1)

    def __call__(self, logits: torch.Tensor) -> torch.Tensor:
        q = torch.exp(logits.float() / self.temp).t()  # [K, B_local]
        B = self._global_count(q)
        K = q.shape[0]
        total = q.sum()
        dist.all_reduce(total)  # expect: nccl_metadata hot
        q /= total
        it = 0
        while it < self.n_iters:
            q /= self._sum_rows(q)
            q /= K
            q /= q.sum(dim=0, keepdim=True)
            q /= B
            it += 1
        return (q * B).t()


_SK = _Sinkhorn()


def solution(teacher_logits: torch.Tensor) -> torch.Tensor:
    return _SK(teacher_logits).to(teacher_logits.dtype)
