"""fp8 all-gather over the copy engine; every other dtype keeps NCCL."""
import cupy as cp
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)
_state = {}


def _fp8_state(x):
    if "hdl" not in _state:
        buf = symm_mem.empty(x.numel(), dtype=torch.uint8, device=x.device)  # expect: rendezvous fallback
        _state["buf"] = buf
        _state["hdl"] = symm_mem.rendezvous(buf, dist.group.WORLD)  # expect: rendezvous fallback
    return _state["buf"], _state["hdl"]


def _fp8_all_gather(x):
    buf, hdl = _fp8_state(x)
    buf.copy_(x.view(torch.uint8).reshape(-1))
    dist.barrier()  # expect: nccl_metadata fallback
    out = torch.empty(hdl.world_size, x.numel(), dtype=torch.uint8, device=x.device)
    stream = torch.cuda.current_stream().cuda_stream
    for r in range(hdl.world_size):
        cp.cuda.runtime.memcpyPeerAsync(out[r].data_ptr(), hdl.rank, hdl.buffer_ptrs[r], r, x.numel(), stream)  # expect: copy_engine fallback
    dist.barrier()  # expect: nccl_metadata fallback
    return out.view(x.dtype).view(-1, *x.shape[1:])


@torch.no_grad()
def solution(x: torch.Tensor) -> torch.Tensor:
    if x.dtype in _FP8:
        return _fp8_all_gather(x)
    world = dist.get_world_size()
    out = torch.empty((world * x.shape[0], *x.shape[1:]), dtype=x.dtype, device=x.device)
    dist.all_gather_into_tensor(out, x.contiguous())  # expect: nccl_payload hot
    return out
