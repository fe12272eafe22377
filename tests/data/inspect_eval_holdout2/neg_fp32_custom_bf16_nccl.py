"""All-reduce with a hand-written one-shot peer kernel for float32 payloads (IPC via
ctypes). Every other dtype, bfloat16 included, goes through NCCL."""
import ctypes

import torch
import torch.distributed as dist
from torch.utils.cpp_extension import load_inline

_CUDA = r"""
#include <torch/extension.h>
__global__ void one_shot(float** peers, float* out, int64_t n, int world) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= n) return;
    float acc = 0.f;
    for (int r = 0; r < world; ++r) acc += peers[r][i];
    out[i] = acc;
}
void launch(torch::Tensor ptrs, torch::Tensor out, int64_t n, int64_t world) {
    one_shot<<<(n + 255) / 256, 256>>>((float**)ptrs.data_ptr<int64_t>(), out.data_ptr<float>(), n, (int)world);
}
"""
_CPP = "void launch(torch::Tensor ptrs, torch::Tensor out, int64_t n, int64_t world);"

_ext = None
_peer = None
_cudart = ctypes.CDLL("libcudart.so")


class _Handle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_byte * 64)]


def _setup(n: int, device: torch.device) -> None:
    global _ext, _peer
    _ext = load_inline("one_shot_f32", cpp_sources=_CPP, cuda_sources=_CUDA, functions=["launch"])
    world, rank = dist.get_world_size(), dist.get_rank()
    stage = torch.empty(n, dtype=torch.float32, device=device)
    h = _Handle()
    _cudart.cudaIpcGetMemHandle(ctypes.byref(h), ctypes.c_void_p(stage.data_ptr()))  # expect: rendezvous fallback
    hs = [None] * world
    dist.all_gather_object(hs, bytes(h))  # expect: nccl_metadata fallback
    ptrs = []
    for r in range(world):
        if r == rank:
            ptrs.append(stage.data_ptr())
            continue
        p = ctypes.c_void_p()
        _cudart.cudaIpcOpenMemHandle(ctypes.byref(p), _Handle.from_buffer_copy(hs[r]), 1)  # expect: rendezvous fallback
        ptrs.append(p.value)
    _peer = (stage, torch.tensor(ptrs, dtype=torch.int64, device=device))


def solution(tensor: torch.Tensor) -> torch.Tensor:
    if tensor.dtype != torch.float32:
        out = tensor.clone()
        dist.all_reduce(out)  # expect: nccl_payload hot
        return out
    if _peer is None or _peer[0].numel() != tensor.numel():
        _setup(tensor.numel(), tensor.device)
    stage, ptrs = _peer
    stage.copy_(tensor.view(-1))
    torch.cuda.synchronize()
    dist.barrier()  # expect: nccl_metadata fallback
    out = torch.empty_like(tensor)
    _ext.launch(ptrs, out, tensor.numel(), dist.get_world_size())
    torch.cuda.synchronize()
    dist.barrier()  # expect: nccl_metadata fallback
    return out
