import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem


def _state(x: torch.Tensor):
    if not hasattr(solution, "_sym"):
        buf = symm_mem.empty((2,) + tuple(x.shape), dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        hdl = symm_mem.rendezvous(buf, dist.group.WORLD.group_name)  # expect: rendezvous setup
        solution._sym = (buf, hdl)
    return solution._sym


def solution(x: torch.Tensor) -> torch.Tensor:
    """Ring-attention style KV rotation done with copy engines."""
    rank = dist.get_rank()
    world = dist.get_world_size()
    buf, hdl = _state(x)
    shape = tuple(x.shape)
    mine = hdl.get_buffer(rank, (2,) + shape, x.dtype)
    mine[0].copy_(x)
    hdl.barrier()
    acc = x.float().clone()
    left = (rank - 1) % world
    right = (rank + 1) % world
    cur = 0
    for step in range(1, world):
        nxt = 1 - cur
        src_peer = hdl.get_buffer(left, (2,) + shape, x.dtype)
        mine[nxt].copy_(src_peer[cur])  # expect: copy_engine hot
        hdl.barrier()
        acc += mine[nxt].float()
        cur = nxt
    # push the final sum to the right neighbour's second slot
    dst_peer = hdl.get_buffer(right, (2,) + shape, x.dtype)
    dst_peer[1] = acc.to(x.dtype)  # expect: copy_engine hot
    hdl.barrier()
    out = torch.empty_like(x)
    out.copy_(mine[1])
    return out
