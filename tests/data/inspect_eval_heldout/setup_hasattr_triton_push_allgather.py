"""All-gather where each rank pushes its shard into slot `rank` of every peer's
symmetric output buffer from a Triton kernel (NVLink stores, no copy engine)."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
import triton
import triton.language as tl


@triton.jit
def _push_kernel(src_ptr, ptrs_ptr, n, rank, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    vals = tl.load(src_ptr + offs, mask=mask)
    for r in tl.static_range(WORLD):
        dst = tl.load(ptrs_ptr + r).to(tl.pointer_type(tl.bfloat16))
        tl.store(dst + rank * n + offs, vals, mask=mask)


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    world, rank = dist.get_world_size(), dist.get_rank()
    n = tensor.numel()
    if not hasattr(solution, "_symm"):
        buf = symm_mem.empty(world * n, dtype=tensor.dtype, device=tensor.device)  # expect: rendezvous setup
        hdl = symm_mem.rendezvous(buf, dist.group.WORLD.group_name)  # expect: rendezvous setup
        ptrs = torch.tensor(hdl.buffer_ptrs, dtype=torch.int64, device=tensor.device)
        dist.barrier()  # expect: nccl_metadata setup
        solution._symm = (buf, hdl, ptrs)
    buf, hdl, ptrs = solution._symm

    hdl.barrier(channel=0)  # peers are done reading the previous result
    BLOCK = 4096
    _push_kernel[(triton.cdiv(n, BLOCK),)](tensor.contiguous(), ptrs, n, rank, WORLD=world, BLOCK=BLOCK)
    hdl.barrier(channel=1)
    out = torch.empty((world * tensor.shape[0], *tensor.shape[1:]), dtype=tensor.dtype, device=tensor.device)
    out.view(-1).copy_(buf)
    return out
