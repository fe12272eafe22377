# profile: dtype=float32
"""Copy-engine all-gather that only understands bf16; fp32 goes to NCCL."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from cuda.bindings import runtime as cudart

_bufs = {}


def _symm_buffer(x):
    key = x.numel()
    if key in _bufs:
        return _bufs[key]
    buf = symm_mem.empty(x.numel(), dtype=torch.bfloat16, device=x.device)  # expect: rendezvous fallback
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD.group_name)  # expect: rendezvous fallback
    _bufs[key] = (buf, hdl)
    return buf, hdl


def _ce_all_gather(x):
    buf, hdl = _symm_buffer(x)
    buf.copy_(x.view(-1))
    dist.barrier()  # expect: nccl_metadata fallback
    world, rank = hdl.world_size, hdl.rank
    out = torch.empty(world, x.numel(), dtype=x.dtype, device=x.device)
    stream = torch.cuda.current_stream().cuda_stream
    nbytes = x.numel() * 2
    for r in range(world):
        (err,) = cudart.cudaMemcpyPeerAsync(out[r].data_ptr(), rank, hdl.buffer_ptrs[r], r, nbytes, stream)  # expect: copy_engine fallback
        assert err == cudart.cudaError_t.cudaSuccess, err
    torch.cuda.current_stream().synchronize()
    dist.barrier()  # expect: nccl_metadata fallback
    return out.view(world * x.shape[0], *x.shape[1:])


def solution(x: torch.Tensor) -> torch.Tensor:
    if x.dtype is torch.bfloat16:
        return _ce_all_gather(x)
    world = dist.get_world_size()
    out = torch.empty(world * x.shape[0], *x.shape[1:], dtype=x.dtype, device=x.device)
    dist.all_gather_into_tensor(out, x)  # expect: nccl_payload hot
    return out
