"""Block-quantised all-reduce. Each rank quantises its gradient to int8 levels in
128-element blocks with a shared (MAX-reduced) scale per block; the levels are summed
exactly in fp32 through symmetric memory and the result is dequantised."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_BLOCK = 128
_ws = None


def _nccl_allreduce(t: torch.Tensor, op=dist.ReduceOp.SUM) -> torch.Tensor:
    dist.all_reduce(t, op=op)  # expect: nccl_payload hot
    return t


def _rebuild(numel: int, device: torch.device):
    global _ws
    buf = symm_mem.empty(numel, dtype=torch.float32, device=device)  # expect: rendezvous setup
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD.group_name)  # expect: rendezvous setup
    _ws = (buf, hdl)


def _int_sum(q: torch.Tensor) -> torch.Tensor:
    if _ws is None or _ws[0].numel() != q.numel():
        _rebuild(q.numel(), q.device)
    buf, hdl = _ws
    buf.copy_(q.view(-1))
    return torch.ops.symm_mem.one_shot_all_reduce(buf, "sum", dist.group.WORLD.group_name)


@torch.no_grad()
def solution(grad: torch.Tensor) -> torch.Tensor:
    blocks = grad.float().reshape(-1, _BLOCK)
    amax = blocks.abs().amax(dim=1, keepdim=True)
    amax = _nccl_allreduce(amax, dist.ReduceOp.MAX).clamp_(min=1e-12)
    scale = amax / 127.0
    q = torch.round(blocks / scale).clamp_(-127, 127)
    try:
        summed = _int_sum(q)
    except RuntimeError:
        _rebuild(q.numel(), q.device)
        summed = _nccl_allreduce(q.view(-1).clone())
    return (summed.view(-1, _BLOCK).float() * scale).view_as(grad).to(grad.dtype)
