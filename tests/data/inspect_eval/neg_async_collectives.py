"""Chunked all-reduce overlapped with a local epilogue, using async NCCL and functional collectives."""
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

CHUNKS = 4


@torch.no_grad()
def solution(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    flat = x.reshape(-1).clone()
    pieces = flat.chunk(CHUNKS)
    works = []
    for p in pieces:
        works.append(dist.all_reduce(p, async_op=True))  # expect: nccl_payload hot
    outs = []
    for w, p in zip(works, pieces):
        w.wait()
        outs.append(torch.nn.functional.gelu(p.float()).to(p.dtype))
    y = torch.cat(outs).view_as(x)
    b = funcol.all_reduce(bias, "avg", dist.group.WORLD)  # expect: nccl_payload hot
    b = funcol.wait_tensor(b)
    return y + b
