"""GEMM + all-reduce (row-parallel linear). The custom Triton reduction reads the fp32
partials of all peers through symmetric memory; bf16 partials go through NCCL, whose
ring is already close to link bandwidth at this size."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
import triton
import triton.language as tl


@triton.jit
def _sum_peers_kernel(ptrs_ptr, out_ptr, n, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for r in tl.static_range(WORLD):
        base = tl.load(ptrs_ptr + r).to(tl.pointer_type(tl.float32))
        acc += tl.load(base + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, acc, mask=mask)


_symm = {}


def _fp32_allreduce(y: torch.Tensor) -> torch.Tensor:
    n = y.numel()
    if n not in _symm:
        buf = symm_mem.empty(n, dtype=torch.float32, device=y.device)  # expect: rendezvous fallback
        hdl = symm_mem.rendezvous(buf, dist.group.WORLD.group_name)  # expect: rendezvous fallback
        ptrs = torch.tensor(hdl.buffer_ptrs, dtype=torch.int64, device=y.device)
        _symm[n] = (buf, hdl, ptrs)
    buf, hdl, ptrs = _symm[n]
    buf.copy_(y.view(-1))
    hdl.barrier(channel=0)
    out = torch.empty_like(y)
    BLOCK = 2048
    _sum_peers_kernel[(triton.cdiv(n, BLOCK),)](ptrs, out, n, WORLD=hdl.world_size, BLOCK=BLOCK)
    hdl.barrier(channel=1)
    return out


@torch.no_grad()
def solution(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    y = torch.matmul(a, b)
    if y.dtype == torch.float32:
        return _fp32_allreduce(y)
    dist.all_reduce(y, op=dist.ReduceOp.SUM)  # expect: nccl_payload hot
    return y
