import cupy as cp
import torch
import torch.distributed as dist
import triton
import triton.language as tl


@triton.jit
def _scale_kernel(x_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(x_ptr + offs, mask=m).to(tl.float32)
    tl.store(x_ptr + offs, (v * scale).to(tl.bfloat16), mask=m)


def solution(x: torch.Tensor) -> torch.Tensor:
    """Mean all-reduce: local D2D copy with CuPy, NCCL sum, then a Triton scale."""
    world = dist.get_world_size()
    out = torch.empty_like(x)
    with cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream) as s:
        cp.cuda.runtime.memcpyAsync(out.data_ptr(), x.data_ptr(), x.nbytes,
                                    cp.cuda.runtime.memcpyDeviceToDevice, s.ptr)
    dist.all_reduce(out, op=dist.ReduceOp.SUM)  # expect: nccl_payload hot
    n = out.numel()
    _scale_kernel[(triton.cdiv(n, 4096),)](out, n, 1.0 / world, BLOCK=4096)
    return out
