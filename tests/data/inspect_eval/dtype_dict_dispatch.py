import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
import triton
import triton.language as tl

_handles = {}


@triton.jit
def _rs_kernel(ptr_tab, out_ptr, chunk, rank, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < chunk
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for r in tl.static_range(WORLD):
        src = tl.load(ptr_tab + r).to(tl.pointer_type(out_ptr.dtype.element_ty))
        acc += tl.load(src + rank * chunk + offs, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, acc.to(out_ptr.dtype.element_ty), mask=mask)


def _handle_for(x):
    key = (tuple(x.shape), x.dtype)
    entry = _handles.get(key)
    if entry is None:
        buf = symm_mem.empty(x.shape, dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        hdl = symm_mem.rendezvous(buf, dist.group.WORLD)  # expect: rendezvous setup
        tab = torch.tensor(hdl.buffer_ptrs, dtype=torch.int64, device=x.device)
        entry = _handles[key] = (buf, hdl, tab)
    return entry


def _custom_rs(x):
    buf, hdl, tab = _handle_for(x)
    buf.copy_(x)
    dist.barrier()  # expect: nccl_metadata hot
    world = hdl.world_size
    chunk = x.numel() // world
    out = torch.empty(x.shape[0] // world, *x.shape[1:], dtype=x.dtype, device=x.device)
    _rs_kernel[(triton.cdiv(chunk, 2048),)](tab, out, chunk, hdl.rank, WORLD=world, BLOCK=2048)
    dist.barrier()  # expect: nccl_metadata hot
    return out


def _nccl_rs(x):
    world = dist.get_world_size()
    out = x.new_empty(x.shape[0] // world, *x.shape[1:])
    dist.reduce_scatter_tensor(out, x)  # expect: nccl_payload fallback
    return out


_DISPATCH = {torch.bfloat16: _custom_rs, torch.float16: _custom_rs}


def solution(x: torch.Tensor) -> torch.Tensor:
    impl = _DISPATCH.get(x.dtype, _nccl_rs)
    return impl(x.contiguous())
