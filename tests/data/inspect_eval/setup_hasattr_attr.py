import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem


def solution(x: torch.Tensor) -> torch.Tensor:
    """Broadcast from rank 0 by having every non-root rank pull root's symmetric buffer."""
    if not hasattr(solution, "_symm"):
        buf = symm_mem.empty(x.shape, dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        hdl = symm_mem.rendezvous(buf, dist.group.WORLD.group_name)  # expect: rendezvous setup
        solution._symm = (buf, hdl)
    buf, hdl = solution._symm
    if hdl.rank == 0:
        buf.copy_(x)
    dist.barrier()  # expect: nccl_metadata hot
    out = torch.empty_like(x)
    if hdl.rank == 0:
        out.copy_(buf)
    else:
        out.copy_(hdl.get_buffer(0, x.shape, x.dtype))  # expect: copy_engine hot
    dist.barrier()  # expect: nccl_metadata hot
    return out
