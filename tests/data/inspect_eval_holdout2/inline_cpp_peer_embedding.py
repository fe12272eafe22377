"""Vocab-parallel embedding lookup by replication: every rank owns a row shard of
the table; the full table is assembled with peer DMA issued from C++
(cudaMemcpyPeerAsync), then indices are looked up locally."""
import torch
import torch.distributed as dist
from cuda import cudart
from torch.utils.cpp_extension import load_inline

_CPP = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <ATen/cuda/CUDAContext.h>

void pull_rows(torch::Tensor dst, std::vector<int64_t> peer_ptrs, int64_t rank, int64_t shard_bytes) {
    auto stream = at::cuda::getCurrentCUDAStream();
    char* base = reinterpret_cast<char*>(dst.data_ptr());
    for (int64_t r = 0; r < (int64_t)peer_ptrs.size(); ++r) {
        if (r == rank) continue;
        cudaMemcpyPeerAsync(base + r * shard_bytes, (int)rank,  // # expect: copy_engine hot
                            reinterpret_cast<void*>(peer_ptrs[r]), (int)r, shard_bytes, stream);
    }
}
"""

_EXT = load_inline(name="emb_pull_rows", cpp_sources=_CPP, functions=["pull_rows"], with_cuda=True)
_TABLE = {}


def _replica(shard: torch.Tensor):
    key = tuple(shard.shape)
    if key in _TABLE:
        return _TABLE[key]
    world, rank = dist.get_world_size(), dist.get_rank()
    rows = shard.shape[0]
    full = torch.empty((world * rows, shard.shape[1]), dtype=shard.dtype, device=shard.device)
    mine = full[rank * rows:(rank + 1) * rows]
    shard_bytes = mine.numel() * mine.element_size()
    err, h = cudart.cudaIpcGetMemHandle(full.data_ptr())  # expect: rendezvous setup
    hs = [None] * world
    dist.all_gather_object(hs, bytes(h.reserved))  # expect: nccl_metadata setup
    ptrs = []
    for r in range(world):
        if r == rank:
            ptrs.append(full.data_ptr())
            continue
        ph = cudart.cudaIpcMemHandle_t()
        ph.reserved = hs[r]
        err, p = cudart.cudaIpcOpenMemHandle(ph, cudart.cudaIpcMemLazyEnablePeerAccess)  # expect: rendezvous setup
        ptrs.append(int(p) + r * shard_bytes)
    _TABLE[key] = (full, mine, ptrs, shard_bytes)
    return _TABLE[key]


def solution(indices: torch.Tensor, weight_shard: torch.Tensor) -> torch.Tensor:
    rank = dist.get_rank()
    full, mine, ptrs, shard_bytes = _replica(weight_shard)
    mine.copy_(weight_shard)
    torch.cuda.current_stream().synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    _EXT.pull_rows(full, ptrs, rank, shard_bytes)
    torch.cuda.current_stream().synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    ids = (indices[:, 0].float().abs() * 1000).long() % full.shape[0]
    return full[ids]
