"""Hangs: rank 1 never joins the all-reduce and ignores SIGTERM, so only SIGKILL ends it;
rank 0 waits in the all-reduce."""

import signal
import time

import torch
import torch.distributed as dist


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    if dist.get_rank() == 1:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        while True:
            time.sleep(0.1)
    out = tensor.clone()
    dist.all_reduce(out, op=dist.ReduceOp.SUM)
    return out * 0.5 + 1.0
