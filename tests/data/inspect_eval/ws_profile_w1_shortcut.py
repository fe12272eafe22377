# profile: world_size=1
"""Copy-engine all-gather with a single-GPU shortcut (inspected with world_size=1)."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from cuda import cudart

_cache = {}


def _setup(x):
    key = (x.numel(), x.dtype)
    if key not in _cache:
        buf = symm_mem.empty(x.numel(), dtype=x.dtype, device=x.device)  # expect: rendezvous fallback
        hdl = symm_mem.rendezvous(buf, dist.group.WORLD.group_name)  # expect: rendezvous fallback
        _cache[key] = (buf, hdl)
    return _cache[key]


def solution(x: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    if world == 1:
        return x.clone()
    buf, hdl = _setup(x)
    buf.copy_(x.view(-1))
    dist.barrier()  # expect: nccl_metadata fallback
    out = torch.empty(world, x.numel(), dtype=x.dtype, device=x.device)
    nbytes = x.numel() * x.element_size()
    s = torch.cuda.current_stream().cuda_stream
    for r in range(world):
        cudart.cudaMemcpyPeerAsync(out[r].data_ptr(), hdl.rank, hdl.buffer_ptrs[r], r, nbytes, s)  # expect: copy_engine fallback
    cudart.cudaStreamSynchronize(s)
    dist.barrier()  # expect: nccl_metadata fallback
    return out.view(world * x.shape[0], *x.shape[1:])
