"""ZeRO-2 gradient reduce-scatter through symmetric memory and a Triton pull
kernel. Small, huge, oddly sized, misaligned or non-bf16 buckets use NCCL."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
import triton
import triton.language as tl

_MIN_ELEMS = 1 << 14
_MAX_ELEMS = 1 << 26
_h = None


@triton.jit
def _rs_kernel(ptrs, out_ptr, shard, rank, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < shard
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for r in tl.static_range(WORLD):
        p = tl.load(ptrs + r).to(tl.pointer_type(tl.bfloat16))
        acc += tl.load(p + rank * shard + offs, mask=m, other=0.0).to(tl.float32)
    tl.store(out_ptr + offs, acc.to(tl.bfloat16), mask=m)


def _nccl_rs(flat: torch.Tensor, world: int) -> torch.Tensor:
    out = flat.new_empty(flat.numel() // world)
    dist.reduce_scatter_tensor(out, flat)  # expect: nccl_payload fallback
    return out


def solution(grad: torch.Tensor) -> torch.Tensor:
    global _h
    world, rank = dist.get_world_size(), dist.get_rank()
    flat = grad.reshape(-1)
    n = flat.numel()
    if n < _MIN_ELEMS or n > _MAX_ELEMS:
        return _nccl_rs(flat, world)
    if n % (world * 8) != 0 or flat.data_ptr() % 16 != 0:
        return _nccl_rs(flat, world)
    if grad.dtype != torch.bfloat16:
        return _nccl_rs(flat, world)
    if _h is None:
        buf = symm_mem.empty(n, dtype=torch.bfloat16, device=grad.device)  # expect: rendezvous setup
        hdl = symm_mem.rendezvous(buf, dist.group.WORLD.group_name)  # expect: rendezvous setup
        _h = (buf, hdl, torch.tensor(hdl.buffer_ptrs, dtype=torch.int64, device=grad.device))
    buf, hdl, ptrs = _h
    buf.copy_(flat)
    hdl.barrier(channel=0)
    shard = n // world
    out = torch.empty(shard, dtype=grad.dtype, device=grad.device)
    _rs_kernel[(triton.cdiv(shard, 2048),)](ptrs, out, shard, rank, WORLD=world, BLOCK=2048)
    hdl.barrier(channel=1)
    return out
