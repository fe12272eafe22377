"""Ulysses-style all-to-all: head block h goes to rank h; strided 2-D copies into peers' buffers."""
from cuda.bindings import runtime as cudart
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_KIND = cudart.cudaMemcpyKind.cudaMemcpyDeviceToDevice
_state = {}


def _symm(x):
    if "hdl" not in _state:
        recv = symm_mem.empty(x.shape, dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        _state["recv"] = recv
        _state["hdl"] = symm_mem.rendezvous(recv, dist.group.WORLD)  # expect: rendezvous setup
    return _state["recv"], _state["hdl"]


def solution(x: torch.Tensor) -> torch.Tensor:
    recv, hdl = _symm(x)
    rank, world = hdl.rank, hdl.world_size
    seq, hidden = x.shape
    width = hidden // world * x.element_size()
    pitch = hidden * x.element_size()
    stream = torch.cuda.current_stream().cuda_stream
    dist.barrier()  # expect: nccl_metadata hot
    for peer in range(world):
        src = x.data_ptr() + peer * width
        dst = hdl.buffer_ptrs[peer] + rank * width
        err, = cudart.cudaMemcpy2DAsync(dst, pitch, src, pitch, width, seq, _KIND, stream)  # expect: copy_engine hot
        if err != cudart.cudaError_t.cudaSuccess:
            raise RuntimeError(f"cudaMemcpy2DAsync: {err}")
    cudart.cudaStreamSynchronize(stream)
    dist.barrier()  # expect: nccl_metadata hot
    return recv.clone()
