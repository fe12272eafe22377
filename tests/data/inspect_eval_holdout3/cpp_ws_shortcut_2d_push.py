import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>

void push_tile(torch::Tensor src, int64_t dst_base, int64_t dst_pitch, int64_t col_off_bytes,
               int64_t width_bytes, int64_t rows) {
    auto stream = at::cuda::getCurrentCUDAStream();
    char* d = reinterpret_cast<char*>(dst_base) + col_off_bytes;
    cudaMemcpy2DAsync(d, dst_pitch, src.data_ptr(), width_bytes, width_bytes, rows, cudaMemcpyDeviceToDevice, stream);  // # expect: copy_engine hot
}
"""

_EXT = load_inline(name="tile_push_2d", cpp_sources=_SRC, functions=["push_tile"], with_cuda=True)
_H = {}


def solution(x: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    rank = dist.get_rank()
    if world == 1:
        return x.clone()
    if world <= 2 or (world & (world - 1)) != 0:
        out = [torch.empty_like(x) for _ in range(world)]
        dist.all_gather(out, x)  # expect: nccl_payload fallback
        return torch.cat(out, dim=1)

    rows, cols = x.shape
    if "hdl" not in _H:
        _H["buf"] = symm_mem.empty((rows, world * cols), dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        _H["hdl"] = symm_mem.rendezvous(_H["buf"], dist.group.WORLD.group_name)  # expect: rendezvous setup
    hdl = _H["hdl"]
    hdl.barrier()
    width = cols * x.element_size()
    pitch = world * width
    xs = x.contiguous()
    for p in range(world):
        _EXT.push_tile(xs, hdl.buffer_ptrs[p], pitch, rank * width, width, rows)
    hdl.barrier()
    return _H["buf"].clone()
