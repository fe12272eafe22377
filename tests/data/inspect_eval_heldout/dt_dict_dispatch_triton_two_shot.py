"""Two-shot all-reduce in Triton over symmetric memory: reduce-scatter phase (each
rank sums its 1/W slice from all peers), barrier, all-gather phase (each rank reads
the reduced slices back). Only 16-bit float types have a compiled kernel."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
import triton
import triton.language as tl

_TL_TYPES = {torch.bfloat16: tl.bfloat16, torch.float16: tl.float16}
_ws = {}


@triton.jit
def _reduce_slice(ptrs, n_slice, rank, WORLD: tl.constexpr, DT: tl.constexpr, BLOCK: tl.constexpr):
    offs = rank * n_slice + tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < (rank + 1) * n_slice
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for r in tl.static_range(WORLD):
        p = tl.load(ptrs + r).to(tl.pointer_type(DT))
        acc += tl.load(p + offs, mask=mask, other=0.0).to(tl.float32)
    mine = tl.load(ptrs + rank).to(tl.pointer_type(DT))
    tl.store(mine + offs + WORLD * n_slice, acc.to(DT), mask=mask)


@triton.jit
def _gather_slices(ptrs, out, n_slice, WORLD: tl.constexpr, DT: tl.constexpr, BLOCK: tl.constexpr):
    r = tl.program_id(1)
    offs = r * n_slice + tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < (r + 1) * n_slice
    p = tl.load(ptrs + r).to(tl.pointer_type(DT))
    tl.store(out + offs, tl.load(p + offs + WORLD * n_slice, mask=mask), mask=mask)


def _nccl(x: torch.Tensor) -> torch.Tensor:
    y = x.clone()
    dist.all_reduce(y)  # expect: nccl_payload fallback
    return y


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    dt = _TL_TYPES.get(tensor.dtype)
    if dt is None:
        return _nccl(tensor)
    n = tensor.numel()
    key = (n, tensor.dtype)
    if _ws.get(key) is None:
        buf = symm_mem.empty(2 * n, dtype=tensor.dtype, device=tensor.device)  # expect: rendezvous setup
        hdl = symm_mem.rendezvous(buf, dist.group.WORLD.group_name)  # expect: rendezvous setup
        _ws[key] = (buf, hdl, torch.tensor(hdl.buffer_ptrs, dtype=torch.int64, device=tensor.device))
    buf, hdl, ptrs = _ws[key]
    world, rank = hdl.world_size, hdl.rank
    n_slice = n // world
    buf[:n].copy_(tensor.view(-1))
    hdl.barrier(channel=0)
    _reduce_slice[(triton.cdiv(n_slice, 2048),)](ptrs, n_slice, rank, WORLD=world, DT=dt, BLOCK=2048)
    hdl.barrier(channel=1)
    out = torch.empty_like(tensor)
    _gather_slices[(triton.cdiv(n_slice, 2048), world)](ptrs, out, n_slice, WORLD=world, DT=dt, BLOCK=2048)
    hdl.barrier(channel=2)
    return out
