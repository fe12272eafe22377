import os

import torch
import torch.distributed as dist

_DEBUG_SYNC = os.environ.get("PKB_DEBUG_SYNC") == "1"
_OVERLAP = os.environ.get("PKB_OVERLAP", "1") != "0"


def _check(t: torch.Tensor, tag: str):
    if _DEBUG_SYNC:
        dist.barrier()  # expect: nccl_metadata fallback
        bad = torch.tensor([int(torch.isnan(t).any())], device=t.device)
        dist.all_reduce(bad)  # expect: nccl_metadata fallback
        if bad.item():
            raise RuntimeError(f"nan after {tag}")


def solution(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    rank = dist.get_rank()
    chunks = list(x.chunk(world, dim=0))
    out = torch.empty_like(x)
    if _OVERLAP:
        # chunked pipeline: compute chunk i while chunk i+1 travels
        recv = [torch.empty_like(c) for c in chunks]
        reqs = []
        for i in range(1, world):
            peer_to = (rank + i) % world
            peer_from = (rank - i) % world
            reqs.append(dist.isend(chunks[peer_to].contiguous(), dst=peer_to))  # expect: nccl_payload hot
            reqs.append(dist.irecv(recv[peer_from], src=peer_from))  # expect: nccl_payload hot
        recv[rank] = chunks[rank]
        for r in reqs:
            r.wait()
        gathered = torch.cat(recv, dim=0)
    else:
        gathered = torch.empty_like(x)
        dist.all_to_all_single(gathered, x)  # expect: nccl_payload fallback
    _check(gathered, "exchange")
    out.copy_(gathered @ w.t())
    _check(out, "gemm")
    return out
