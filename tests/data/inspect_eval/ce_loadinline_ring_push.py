import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline

HOST_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
// Push `src` into the next rank's receive slot with the copy engine.
void push_next(torch::Tensor src, int64_t next_ptr, int64_t next_dev) {
    TORCH_CHECK(src.is_contiguous());
    cudaStream_t s = at::cuda::getCurrentCUDAStream();
    C10_CUDA_CHECK(cudaMemcpyPeerAsync((void*)next_ptr, (int)next_dev,  // # expect: copy_engine hot
                                       src.data_ptr(), src.get_device(), src.nbytes(), s));
}
"""
_mod = load_inline(name="ring_push", cpp_sources=[HOST_SRC], functions=["push_next"], with_cuda=True)
_ring = None


def _get_ring(x):
    global _ring
    if _ring is None:
        slot = symm_mem.empty(x.shape, dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        hdl = symm_mem.rendezvous(slot, dist.group.WORLD.group_name)  # expect: rendezvous setup
        _ring = (slot, hdl)
    return _ring


def solution(x: torch.Tensor) -> torch.Tensor:
    """Ring all-gather: world-1 steps, each forwarding the block received in the previous step."""
    slot, hdl = _get_ring(x)
    rank, world = hdl.rank, hdl.world_size
    nxt = (rank + 1) % world
    out = torch.empty((world,) + tuple(x.shape), dtype=x.dtype, device=x.device)
    out[rank].copy_(x)
    for step in range(world - 1):
        send_idx = (rank - step) % world
        dist.barrier()  # expect: nccl_metadata hot
        _mod.push_next(out[send_idx], hdl.buffer_ptrs[nxt], nxt)
        torch.cuda.current_stream().synchronize()
        dist.barrier()  # expect: nccl_metadata hot
        out[(rank - step - 1) % world].copy_(slot)
    return out.reshape(world * x.shape[0], *x.shape[1:])
