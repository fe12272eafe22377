"""Distributed Gaussian splatting: every rank pulls the projected Gaussian
attributes of all peers (driver-API peer copies from symmetric memory), depth-sorts
them and keeps its own share. Old GPUs or CPU tensors use NCCL."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from cuda import cuda

_CTX = {}


def _supported(t: torch.Tensor) -> bool:
    if not torch.cuda.is_available() or not t.is_cuda:
        return False
    return torch.cuda.get_device_capability(t.device) >= (9, 0)


def _nccl_path(g: torch.Tensor) -> torch.Tensor:
    out = [torch.empty_like(g) for _ in range(dist.get_world_size())]
    dist.all_gather(out, g)  # expect: nccl_payload fallback
    return torch.cat(out)[: g.shape[0]]


def _ctx(g: torch.Tensor):
    if "hdl" not in _CTX:
        _CTX["buf"] = symm_mem.empty(g.shape, dtype=g.dtype, device=g.device)  # expect: rendezvous setup
        _CTX["hdl"] = symm_mem.rendezvous(_CTX["buf"], dist.group.WORLD.group_name)  # expect: rendezvous setup
    return _CTX["buf"], _CTX["hdl"]


def solution(gaussians: torch.Tensor) -> torch.Tensor:
    if not _supported(gaussians):
        return _nccl_path(gaussians)
    world, rank = dist.get_world_size(), dist.get_rank()
    buf, hdl = _ctx(gaussians)
    buf.copy_(gaussians)
    hdl.barrier(channel=0)
    out = torch.empty((world,) + tuple(gaussians.shape), dtype=gaussians.dtype, device=gaussians.device)
    nbytes = gaussians.numel() * gaussians.element_size()
    stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
    for r in range(world):
        if r == rank:
            out[r].copy_(gaussians)
            continue
        (err,) = cuda.cuMemcpyDtoDAsync(out[r].data_ptr(), hdl.buffer_ptrs[r], nbytes, stream)  # expect: copy_engine hot
        if err != cuda.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"cuMemcpyDtoDAsync failed: {err}")
    hdl.barrier(channel=1)
    flat = out.reshape(-1, gaussians.shape[-1])
    order = torch.argsort(flat[:, 0].float())  # column 0 holds camera-space depth
    return flat[order][: gaussians.shape[0]]
