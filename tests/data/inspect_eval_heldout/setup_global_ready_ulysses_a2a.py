"""Ulysses sequence parallel all-to-all: gather the sequence, scatter the heads.

Input [S/W, H*D] -> output [S, (H/W)*D]. The first call warms the communicator up
so its lazy NCCL init is not charged to the timed iterations."""
import torch
import torch.distributed as dist

_ready = False


def _warmup(device: torch.device) -> None:
    global _ready
    if not _ready:
        torch.cuda.set_device(device)
        w = torch.zeros(1, device=device)
        dist.all_reduce(w)  # expect: nccl_metadata setup
        dist.barrier()  # expect: nccl_metadata setup
        _ready = True


@torch.no_grad()
def solution(x: torch.Tensor, num_heads: int = 16) -> torch.Tensor:
    world = dist.get_world_size()
    _warmup(x.device)
    if num_heads % world != 0:
        raise ValueError(f"num_heads={num_heads} not divisible by world size {world}")
    s, hd = x.shape
    head_dim = hd // num_heads
    local_heads = num_heads // world
    # [s, W, hl*d] -> [W, s, hl*d] so that chunk r goes to rank r
    send = x.view(s, world, local_heads * head_dim).transpose(0, 1).contiguous()
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)  # expect: nccl_payload hot
    return recv.view(world * s, local_heads * head_dim)
