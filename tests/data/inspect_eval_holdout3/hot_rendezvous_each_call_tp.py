import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem


def solution(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """TP row-parallel GEMM + all-reduce through symmetric memory, allocated per call."""
    rank = dist.get_rank()
    world = dist.get_world_size()
    partial = x @ w.t()
    buf = symm_mem.empty(partial.shape, dtype=partial.dtype, device=partial.device)  # expect: rendezvous hot
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD.group_name)  # expect: rendezvous hot
    buf.copy_(partial)
    hdl.barrier()
    rows = partial.shape[0] // world
    lo, hi = rank * rows, (rank + 1) * rows
    acc = partial[lo:hi].float()
    tmp = torch.empty((rows, partial.shape[1]), dtype=partial.dtype, device=partial.device)
    for off in range(1, world):
        peer = (rank + off) % world
        remote = hdl.get_buffer(peer, tuple(partial.shape), partial.dtype)
        tmp.copy_(remote[lo:hi])  # expect: copy_engine hot
        acc += tmp.float()
    hdl.barrier()
    buf[lo:hi] = acc.to(partial.dtype)
    hdl.barrier()
    out = torch.empty_like(partial)
    for peer in range(world):
        remote = hdl.get_buffer(peer, tuple(partial.shape), partial.dtype)
        out[peer * rows : (peer + 1) * rows] = remote[peer * rows : (peer + 1) * rows]  # expect: copy_engine hot
    hdl.barrier()
    return out
