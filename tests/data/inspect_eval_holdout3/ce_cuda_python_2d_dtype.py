import torch
import torch.distributed as dist
from cuda import cudart

_PEERS = {}


def _open_peers(buf: torch.Tensor):
    key = buf.data_ptr()
    if key in _PEERS:
        return _PEERS[key]
    rank = dist.get_rank()
    err, handle = cudart.cudaIpcGetMemHandle(buf.data_ptr())  # expect: rendezvous setup
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, bytes(handle.reserved))  # expect: nccl_metadata setup
    ptrs = {}
    for p, raw in enumerate(gathered):
        if p == rank:
            continue
        h = cudart.cudaIpcMemHandle_t()
        h.reserved = raw
        err, ptr = cudart.cudaIpcOpenMemHandle(h, cudart.cudaIpcMemLazyEnablePeerAccess)  # expect: rendezvous setup
        ptrs[p] = ptr
    _PEERS[key] = ptrs
    return ptrs


_RECV = {}


def solution(x: torch.Tensor) -> torch.Tensor:
    rank = dist.get_rank()
    world = dist.get_world_size()
    rows, cols = x.shape
    if x.shape not in _RECV:
        _RECV[x.shape] = torch.empty((rows, world * cols), dtype=x.dtype, device=x.device)
    recv = _RECV[x.shape]
    peers = _open_peers(recv)
    stream = torch.cuda.current_stream().cuda_stream
    width = cols * x.element_size()
    pitch = world * width
    kind = cudart.cudaMemcpyKind.cudaMemcpyDeviceToDevice
    dist.barrier()  # expect: nccl_metadata hot
    if x.dtype in (torch.bfloat16, torch.float16):
        for p, ptr in peers.items():
            cudart.cudaMemcpy2DAsync(ptr + rank * width, pitch, x.data_ptr(), width, width, rows, kind, stream)  # expect: copy_engine hot
    else:
        flat = x.contiguous()
        for p, ptr in peers.items():
            cudart.cudaMemcpyAsync(ptr + rank * flat.numel() * flat.element_size(), flat.data_ptr(), flat.numel() * flat.element_size(), kind, stream)  # expect: copy_engine fallback
    cudart.cudaMemcpy2DAsync(recv.data_ptr() + rank * width, pitch, x.data_ptr(), width, width, rows, kind, stream)
    torch.cuda.current_stream().synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    return recv.clone()
