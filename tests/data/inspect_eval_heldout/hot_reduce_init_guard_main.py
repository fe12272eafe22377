"""Reduce to `dst` with NCCL (sum); the result is only meaningful on `dst`."""
import os

import torch
import torch.distributed as dist


def _ensure_pg() -> None:
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl")  # expect: nccl_metadata fallback
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))


@torch.no_grad()
def solution(tensor: torch.Tensor, dst: int = 0) -> torch.Tensor:
    _ensure_pg()
    out = tensor.contiguous().clone()
    if dist.get_world_size() == 1:
        return out
    # a 2 MiB reduce is latency bound; NCCL's tree algorithm is hard to beat here
    dist.reduce(out, dst=dst, op=dist.ReduceOp.SUM)  # expect: nccl_payload hot
    return out


if __name__ == "__main__":
    dist.init_process_group("nccl")  # expect: nccl_metadata fallback
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    x = torch.full((1024, 1024), float(dist.get_rank() + 1), device="cuda", dtype=torch.bfloat16)
    y = solution(x)
    dist.barrier()  # expect: nccl_metadata fallback
    if dist.get_rank() == 0:
        expected = dist.get_world_size() * (dist.get_world_size() + 1) / 2
        print("max err", (y.float() - expected).abs().max().item())
    dist.destroy_process_group()  # expect: nccl_metadata fallback
