import ctypes

import torch
import torch.distributed as dist

_RT = ctypes.CDLL("libcudart.so")
_IPC = {}


class _Handle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]


def _ipc_ptrs(buf: torch.Tensor) -> list:
    if "ptrs" in _IPC:
        return _IPC["ptrs"]
    rank = dist.get_rank()
    h = _Handle()
    _RT.cudaIpcGetMemHandle(ctypes.byref(h), ctypes.c_void_p(buf.data_ptr()))  # expect: rendezvous unknown
    handles = [None] * dist.get_world_size()
    dist.all_gather_object(handles, bytes(h.reserved))  # expect: nccl_metadata unknown
    ptrs = []
    for p, raw in enumerate(handles):
        if p == rank:
            ptrs.append(buf.data_ptr())
            continue
        hp = _Handle()
        hp.reserved = raw
        dptr = ctypes.c_void_p()
        _RT.cudaIpcOpenMemHandle(ctypes.byref(dptr), hp, ctypes.c_uint(1))  # expect: rendezvous unknown
        ptrs.append(dptr.value)
    _IPC["ptrs"] = ptrs
    return ptrs


def solution(x: torch.Tensor) -> torch.Tensor:
    rank = dist.get_rank()
    world = dist.get_world_size()
    dense = bool((x != 0).float().mean().item() > 0.5)
    if dense:
        out = torch.empty((world,) + tuple(x.shape), dtype=x.dtype, device=x.device)
        dist.all_gather_into_tensor(out, x.unsqueeze(0))  # expect: nccl_payload unknown
        result = out.sum(dim=0)
    else:
        stage = torch.empty_like(x)
        ptrs = _ipc_ptrs(stage)
        stage.copy_(x)
        dist.barrier()  # expect: nccl_metadata unknown
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        left = (rank - 1) % world
        pulled = torch.empty_like(x)
        nbytes = ctypes.c_size_t(x.numel() * x.element_size())
        _RT.cudaMemcpyPeerAsync(ctypes.c_void_p(pulled.data_ptr()), x.device.index, ctypes.c_void_p(ptrs[left]), left, nbytes, stream)  # expect: copy_engine unknown
        torch.cuda.current_stream().synchronize()
        result = x + pulled
    dist.barrier()  # expect: nccl_metadata hot
    return result
