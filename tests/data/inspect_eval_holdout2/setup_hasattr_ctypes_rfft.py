"""PhysicsNeMo-style distributed rfft of a slab-decomposed 2-D field: local rfft
along dim 1, a peer-DMA transpose (ctypes into libcudart), then an fft along the
former row axis."""
import ctypes

import torch
import torch.distributed as dist

_rt = ctypes.CDLL("libcudart.so")
_rt.cudaMemcpyPeerAsync.argtypes = [
    ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p,
]


class cudaIpcMemHandle_t(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_byte * 64)]


def _init_peers(nbytes: int, device: torch.device) -> None:
    world, rank = dist.get_world_size(), dist.get_rank()
    inbox = torch.empty(nbytes * world, dtype=torch.uint8, device=device)
    h = cudaIpcMemHandle_t()
    rc = _rt.cudaIpcGetMemHandle(ctypes.byref(h), ctypes.c_void_p(inbox.data_ptr()))  # expect: rendezvous setup
    if rc != 0:
        raise RuntimeError(f"cudaIpcGetMemHandle failed: {rc}")
    blobs = [None] * world
    dist.all_gather_object(blobs, bytes(h))  # expect: nccl_metadata setup
    ptrs = []
    for r in range(world):
        if r == rank:
            ptrs.append(inbox.data_ptr())
            continue
        ph = cudaIpcMemHandle_t.from_buffer_copy(blobs[r])
        p = ctypes.c_void_p()
        rc = _rt.cudaIpcOpenMemHandle(ctypes.byref(p), ph, ctypes.c_uint(1))  # expect: rendezvous setup
        assert rc == 0, f"cudaIpcOpenMemHandle failed: {rc}"
        ptrs.append(p.value)
    solution._peers = (inbox, ptrs)


def solution(x: torch.Tensor) -> torch.Tensor:
    world, rank = dist.get_world_size(), dist.get_rank()
    rows, cols = x.shape
    y = torch.fft.rfft(x.float(), dim=1)[:, : cols // 2]  # drop Nyquist so cols/2 splits evenly
    send = torch.view_as_real(y).reshape(rows, world, -1).transpose(0, 1).contiguous()  # [W, rows, c]
    nbytes = send[0].numel() * send.element_size()
    if not hasattr(solution, "_peers"):
        _init_peers(nbytes, x.device)
    inbox, ptrs = solution._peers
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    for peer in range(world):
        dst = ctypes.c_void_p(ptrs[peer] + rank * nbytes)
        rc = _rt.cudaMemcpyPeerAsync(dst, peer, ctypes.c_void_p(send[peer].data_ptr()), rank, nbytes, stream)  # expect: copy_engine hot
    torch.cuda.current_stream().synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    recv = inbox.view(torch.float32).view(world, rows, -1, 2)
    cols_local = torch.view_as_complex(recv.contiguous()).permute(2, 0, 1).reshape(-1, world * rows)
    return torch.view_as_real(torch.fft.fft(cols_local, dim=1)).to(x.dtype)
