# profile: dtype=bfloat16 world_size=2
"""Pairwise exchange (all-to-all for two GPUs): with two ranks each one keeps its own
half and pulls the peer's half with cudaMemcpyPeerAsync through CuPy. Larger worlds
use NCCL's all_to_all_single."""
import cupy as cp
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_pair = None


def _pair_state(x: torch.Tensor):
    global _pair
    if _pair is None:
        buf = symm_mem.empty(x.numel(), dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        _pair = (buf, symm_mem.rendezvous(buf, dist.group.WORLD.group_name))  # expect: rendezvous setup
    return _pair


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    x = tensor.contiguous()
    out = torch.empty_like(x)
    if world != 2:
        dist.all_to_all_single(out, x)  # expect: nccl_payload fallback
        return out

    rank = dist.get_rank()
    peer = 1 - rank
    buf, hdl = _pair_state(x)
    buf.copy_(x.view(-1))
    hdl.barrier(channel=0)
    half = x.numel() // 2
    nbytes = half * x.element_size()
    o = out.view(-1)
    o[rank * half:(rank + 1) * half].copy_(x.view(-1)[rank * half:(rank + 1) * half])
    dev = torch.cuda.current_device()
    stream = torch.cuda.current_stream().cuda_stream
    # peer's chunk destined to us sits at offset rank*half of its buffer
    cp.cuda.runtime.memcpyPeerAsync(o[peer * half:].data_ptr(), dev,  # expect: copy_engine hot
                                    hdl.buffer_ptrs[peer] + rank * nbytes, peer, nbytes, stream)
    hdl.barrier(channel=1)
    return out
