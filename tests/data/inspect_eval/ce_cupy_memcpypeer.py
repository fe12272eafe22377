import cupy
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_sym = {}


def _get_sym(x):
    key = x.numel()
    if key not in _sym:
        t = symm_mem.empty(key, dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        _sym[key] = (t, symm_mem.rendezvous(t, dist.group.WORLD))  # expect: rendezvous setup
    return _sym[key]


def solution(x: torch.Tensor) -> torch.Tensor:
    """Reduce-scatter: fetch my slice from every peer with synchronous memcpyPeer, sum in fp32."""
    t, h = _get_sym(x)
    me, world = h.rank, h.world_size
    n = x.numel() // world
    esz = x.element_size()
    t.copy_(x.view(-1))
    torch.cuda.synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    staging = torch.empty(world, n, dtype=x.dtype, device=x.device)
    for p in range(world):
        if p == me:
            staging[p].copy_(x.view(-1)[me * n:(me + 1) * n])
        else:
            cupy.cuda.runtime.memcpyPeer(staging[p].data_ptr(), me, h.buffer_ptrs[p] + me * n * esz, p, n * esz)  # expect: copy_engine hot
    dist.barrier()  # expect: nccl_metadata hot
    return staging.float().sum(0).to(x.dtype).view(x.shape[0] // world, *x.shape[1:])
