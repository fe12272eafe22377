"""Ring all-gather using symmetric memory and cudaMemcpyPeerAsync (cuda-python)."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from cuda import cudart


def _legacy_ipc_setup(buf):
    """Old CUDA-IPC based exchange, replaced by symm_mem.rendezvous."""
    err, handle = cudart.cudaIpcGetMemHandle(buf.data_ptr())  # expect: rendezvous fallback
    handles = [None] * dist.get_world_size()
    dist.all_gather_object(handles, bytes(handle.reserved))  # expect: nccl_metadata fallback
    opened = []
    for raw in handles:
        h = cudart.cudaIpcMemHandle_t()
        h.reserved = raw
        opened.append(cudart.cudaIpcOpenMemHandle(h, cudart.cudaIpcMemLazyEnablePeerAccess)[1])  # expect: rendezvous fallback
    return opened


_symm = {}


def _rendezvous(x):
    if x.numel() not in _symm:
        b = symm_mem.empty(x.numel(), dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        _symm[x.numel()] = (b, symm_mem.rendezvous(b, dist.group.WORLD))  # expect: rendezvous setup
    return _symm[x.numel()]


def solution(x: torch.Tensor) -> torch.Tensor:
    buf, hdl = _rendezvous(x)
    rank, world = hdl.rank, hdl.world_size
    buf.copy_(x.view(-1))
    dist.barrier()  # expect: nccl_metadata hot
    out = torch.empty(world, x.numel(), dtype=x.dtype, device=x.device)
    out[rank].copy_(x.view(-1))
    stream = torch.cuda.current_stream().cuda_stream
    for step in range(1, world):
        src = (rank - step) % world
        cudart.cudaMemcpyPeerAsync(out[src].data_ptr(), rank, hdl.buffer_ptrs[src], src, x.nbytes, stream)  # expect: copy_engine hot
    cudart.cudaStreamSynchronize(stream)
    dist.barrier()  # expect: nccl_metadata hot
    return out.view(world * x.shape[0], *x.shape[1:])
