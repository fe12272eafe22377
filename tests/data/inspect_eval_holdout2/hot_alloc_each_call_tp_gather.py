"""Megatron tensor-parallel all-gather of column-parallel outputs along the last
dimension ([T, H/W] -> [T, H]). The symmetric buffer is allocated and rendezvoused
on every call (simple, no caching); peers are written with copy_."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_WARM = {"done": False}


def _warmup(device: torch.device) -> None:
    # the first NCCL call creates the communicator; keep it out of the timed calls
    z = torch.zeros(1, device=device)
    dist.all_reduce(z)  # expect: nccl_metadata setup
    torch.cuda.synchronize(device)
    _WARM["done"] = True


def solution(y_parallel: torch.Tensor) -> torch.Tensor:
    world, rank = dist.get_world_size(), dist.get_rank()
    if not _WARM["done"]:
        _warmup(y_parallel.device)
    rows, cols = y_parallel.shape
    shape = (world, rows, cols)
    buf = symm_mem.empty(shape, dtype=y_parallel.dtype, device=y_parallel.device)  # expect: rendezvous hot
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD.group_name)  # expect: rendezvous hot
    hdl.barrier(channel=0)
    for peer in range(world):
        if peer == rank:
            buf[rank].copy_(y_parallel)
            continue
        hdl.get_buffer(peer, shape, y_parallel.dtype)[rank].copy_(y_parallel)  # expect: copy_engine hot
    hdl.barrier(channel=1)
    return buf.permute(1, 0, 2).reshape(rows, world * cols).contiguous()
