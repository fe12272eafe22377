"""All-to-all with a peer-DMA implementation for 4-byte dtypes (CuPy IPC). The
dispatch table has no entry for half types, which take the NCCL default."""
import cupy as cp
import torch
import torch.distributed as dist

_PEERS = {}


def _nccl_a2a(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    dist.all_to_all_single(out, x.contiguous())  # expect: nccl_payload hot
    return out


def _peer_setup(nbytes: int, device: torch.device):
    world, rank = dist.get_world_size(), dist.get_rank()
    inbox = torch.empty(nbytes, dtype=torch.uint8, device=device)
    h = cp.cuda.runtime.ipcGetMemHandle(inbox.data_ptr())  # expect: rendezvous fallback
    hs = [None] * world
    dist.all_gather_object(hs, h)  # expect: nccl_metadata fallback
    ptrs = {r: cp.cuda.runtime.ipcOpenMemHandle(hs[r]) for r in range(world) if r != rank}  # expect: rendezvous fallback
    ptrs[rank] = inbox.data_ptr()
    return inbox, ptrs


def _dma_a2a(x: torch.Tensor) -> torch.Tensor:
    world, rank = dist.get_world_size(), dist.get_rank()
    nbytes = x.numel() * x.element_size()
    key = (nbytes, x.device.index)
    if key not in _PEERS:
        _PEERS[key] = _peer_setup(nbytes, x.device)
    inbox, ptrs = _PEERS[key]
    blk = nbytes // world
    stream = torch.cuda.current_stream().cuda_stream
    for p in range(world):
        cp.cuda.runtime.memcpyPeerAsync(ptrs[p] + rank * blk, p, x.data_ptr() + p * blk, rank, blk, stream)  # expect: copy_engine fallback
    torch.cuda.current_stream().synchronize()
    dist.barrier()  # expect: nccl_metadata fallback
    return inbox.view(x.dtype).view_as(x).clone()


_IMPL = {
    torch.float32: lambda t: _dma_a2a(t),
    torch.int32: lambda t: _dma_a2a(t),
}


def solution(tensor: torch.Tensor) -> torch.Tensor:
    impl = _IMPL.get(tensor.dtype, _nccl_a2a)
    return impl(tensor)
