"""All-to-all, push model: chunk r of the input is written straight into peer r's
receive buffer (opened through CUDA IPC) with cudaMemcpyAsync via CuPy."""
import cupy as cp
import torch
import torch.distributed as dist

_CACHE = {}


def _peer_recv_buffers(numel: int, dtype: torch.dtype, device: torch.device):
    key = (numel, dtype, device.index)
    if key in _CACHE:
        return _CACHE[key]
    rt = cp.cuda.runtime
    recv = torch.empty(numel, dtype=dtype, device=device)
    handle = rt.ipcGetMemHandle(recv.data_ptr())  # expect: rendezvous setup
    handles = [None] * dist.get_world_size()
    dist.all_gather_object(handles, handle)  # expect: nccl_metadata setup
    rank = dist.get_rank()
    ptrs = [recv.data_ptr() if r == rank else rt.ipcOpenMemHandle(h)  # expect: rendezvous setup
            for r, h in enumerate(handles)]
    _CACHE[key] = (recv, ptrs)
    return _CACHE[key]


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    rank, world = dist.get_rank(), dist.get_world_size()
    x = tensor.contiguous().view(-1)
    recv, ptrs = _peer_recv_buffers(x.numel(), x.dtype, x.device)
    torch.cuda.current_stream().synchronize()
    dist.barrier()  # expect: nccl_metadata hot

    chunk = x.numel() // world
    nbytes = chunk * x.element_size()
    stream = torch.cuda.current_stream().cuda_stream
    for r in range(world):
        cp.cuda.runtime.memcpyAsync(ptrs[r] + rank * nbytes, x.data_ptr() + r * nbytes,  # expect: copy_engine hot
                                    nbytes, cp.cuda.runtime.memcpyDeviceToDevice, stream)
    torch.cuda.current_stream().synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    return recv.view_as(tensor).clone()
