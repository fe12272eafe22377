"""All-gather with a Triton kernel that pulls every peer's shard through symmetric
memory. The ctypes IPC path and the NCCL reference are kept from an earlier version."""
import ctypes

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
import triton
import triton.language as tl

_libcudart = ctypes.CDLL("libcudart.so")


class _IpcHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_byte * 64)]


def _legacy_ipc_open(t: torch.Tensor):
    h = _IpcHandle()
    _libcudart.cudaIpcGetMemHandle(ctypes.byref(h), ctypes.c_void_p(t.data_ptr()))  # expect: rendezvous fallback
    handles = [None] * dist.get_world_size()
    dist.all_gather_object(handles, bytes(h.reserved))  # expect: nccl_metadata fallback
    ptrs = []
    for blob in handles:
        peer = _IpcHandle.from_buffer_copy(blob)
        p = ctypes.c_void_p()
        _libcudart.cudaIpcOpenMemHandle(ctypes.byref(p), peer, 1)  # expect: rendezvous fallback
        ptrs.append(p.value)
    return ptrs


def _nccl_reference(t: torch.Tensor) -> torch.Tensor:
    out = t.new_empty((dist.get_world_size() * t.shape[0], *t.shape[1:]))
    dist.all_gather_into_tensor(out, t)  # expect: nccl_payload fallback
    return out


@triton.jit
def _gather_kernel(ptrs, out, n, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    r = tl.program_id(1)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    src = tl.load(ptrs + r).to(tl.pointer_type(tl.bfloat16))
    vals = tl.load(src + offs, mask=offs < n)
    tl.store(out + r * n + offs, vals, mask=offs < n)


_state = None


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    global _state
    if _state is None:
        buf = symm_mem.empty(tensor.shape, dtype=tensor.dtype, device=tensor.device)  # expect: rendezvous setup
        hdl = symm_mem.rendezvous(buf, dist.group.WORLD.group_name)  # expect: rendezvous setup
        _state = (buf, hdl, torch.tensor(hdl.buffer_ptrs, device=tensor.device, dtype=torch.int64))
    buf, hdl, ptrs = _state
    buf.copy_(tensor)
    hdl.barrier(channel=0)
    n, world = tensor.numel(), hdl.world_size
    out = tensor.new_empty((world * tensor.shape[0], *tensor.shape[1:]))
    _gather_kernel[(triton.cdiv(n, 4096), world)](ptrs, out, n, WORLD=world, BLOCK=4096)
    hdl.barrier(channel=1)
    return out
