"""TP Muon: Newton-Schulz orthogonalisation of a row-sharded momentum matrix.
Gram matrices are all-reduced across TP ranks; the iteration stops early once the
orthogonality residual is below tol."""
import torch
import torch.distributed as dist

_A, _B, _C = 3.4445, -4.7750, 2.0315


def _fro_sq(x: torch.Tensor) -> torch.Tensor:
    s = x.pow(2).sum().reshape(1)
    dist.all_reduce(s)  # expect: nccl_metadata hot
    return s


def solution(momentum: torch.Tensor, max_iters: int = 5, tol: float = 1e-3) -> torch.Tensor:
    x = momentum.float()
    x = x / (_fro_sq(x).sqrt() + 1e-7)
    cols = x.shape[1]
    eye = torch.eye(cols, device=x.device)
    g = x.t() @ x
    dist.all_reduce(g)  # expect: nccl_payload hot
    it = 0
    while it < max_iters and ((g - eye).norm() / cols).item() > tol:
        gg = g @ g
        x = _A * x + x @ (_B * g + _C * gg)
        g = x.t() @ x
        dist.all_reduce(g)  # expect: nccl_payload unknown
        it += 1
    its = torch.tensor([float(it)], device=x.device)
    dist.all_reduce(its, op=dist.ReduceOp.MAX)  # expect: nccl_metadata hot
    solution.iterations = its
    return x.to(momentum.dtype)
