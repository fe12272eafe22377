import os

import torch
import torch.distributed as dist


def _ensure_pg():
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl", device_id=torch.device("cuda", int(os.environ["LOCAL_RANK"])))  # expect: nccl_metadata fallback
        dist.barrier()  # expect: nccl_metadata fallback


@torch.no_grad()
def solution(x: torch.Tensor) -> torch.Tensor:
    """Reduce to rank 0 with NCCL; other ranks return their input untouched."""
    _ensure_pg()
    rank = dist.get_rank()
    y = x.clone()
    dist.reduce(y, dst=0, op=dist.ReduceOp.SUM)  # expect: nccl_payload hot
    if rank != 0:
        return x.clone()
    return y
