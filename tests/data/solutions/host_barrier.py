import torch
import torch.distributed as dist


def _ready():
    sizes = [None] * dist.get_world_size()
    dist.all_gather_object(sizes, 1)
    return sizes


def solution(x: torch.Tensor) -> torch.Tensor:
    _ready()
    dist.barrier()
    return x * 2
