"""GEMM + reduce-scatter (row-parallel linear with a sequence-parallel output).
Every rank computes its full partial product; row block p is pushed to rank p with
cudaMemcpyPeerAsync into p's symmetric buffer; each rank sums what it received."""
import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from cuda.bindings import runtime as cudart

_USE_CE = os.getenv("PKB_GEMM_RS_COPY_ENGINE", "1") != "0"
_RS = None


class _RSBuffers:
    def __init__(self, rows: int, cols: int, dtype, device):
        world = dist.get_world_size()
        self.buf = symm_mem.empty((world, rows, cols), dtype=dtype, device=device)  # expect: rendezvous setup
        self.hdl = symm_mem.rendezvous(self.buf, group=dist.group.WORLD)  # expect: rendezvous setup
        self.block_bytes = rows * cols * self.buf.element_size()


def solution(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    global _RS
    world, rank = dist.get_world_size(), dist.get_rank()
    partial = torch.matmul(a, b)
    rows = partial.shape[0] // world
    if not _USE_CE:
        out = partial.new_empty((rows, partial.shape[1]))
        dist.reduce_scatter_tensor(out, partial)  # expect: nccl_payload fallback
        return out
    if _RS is None:
        _RS = _RSBuffers(rows, partial.shape[1], partial.dtype, partial.device)
    rs = _RS
    stream = torch.cuda.current_stream().cuda_stream
    rs.hdl.barrier(channel=0)
    for i in range(world):
        p = (rank + i) % world
        src = partial[p * rows:(p + 1) * rows]
        dst = rs.hdl.buffer_ptrs[p] + rank * rs.block_bytes
        (err,) = cudart.cudaMemcpyPeerAsync(dst, p, src.data_ptr(), rank, rs.block_bytes, stream)  # expect: copy_engine hot
    rs.hdl.barrier(channel=1)
    return rs.buf.float().sum(0).to(partial.dtype)
