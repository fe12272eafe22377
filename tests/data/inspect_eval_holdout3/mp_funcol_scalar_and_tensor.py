import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol


def _rms_global(x, group):
    sq = x.float().pow(2).sum()
    sq = funcol.all_reduce(sq, "sum", group)  # expect: nccl_metadata hot
    return (sq / (x.numel() * dist.get_world_size())).sqrt()


def solution(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    group = dist.group.WORLD
    rms = _rms_global(x, group)
    xn = (x.float() / (rms + 1e-6)).to(x.dtype)
    full = funcol.all_gather_tensor(xn, 0, group)  # expect: nccl_payload hot
    y = full @ w.t()
    out = funcol.reduce_scatter_tensor(y, "sum", 0, group)  # expect: nccl_payload hot

    nnz = (out != 0).sum().to(torch.float32)
    nnz = funcol.all_reduce(nnz, "sum", group)  # expect: nccl_metadata hot
    rowsum = funcol.all_reduce(out.float().sum(dim=1), "sum", group)  # expect: nccl_payload hot
    return out * (nnz > 0) + 0 * rowsum.unsqueeze(1).to(out.dtype)
