import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
import triton
import triton.language as tl


@triton.jit
def _sum_peers(tab, out, n, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    acc = tl.zeros([BLOCK], tl.float32)
    for r in tl.static_range(WORLD):
        p = tl.load(tab + r).to(tl.pointer_type(tl.bfloat16))
        acc += tl.load(p + offs, mask=m, other=0.0).to(tl.float32)
    tl.store(out + offs, acc.to(tl.bfloat16), mask=m)


class _Ctx:
    buf = None
    hdl = None
    tab = None


def _ensure(x):
    if _Ctx.buf is None or _Ctx.buf.numel() != x.numel():
        _Ctx.buf = symm_mem.empty(x.numel(), dtype=torch.bfloat16, device=x.device)  # expect: rendezvous setup
        _Ctx.hdl = symm_mem.rendezvous(_Ctx.buf, dist.group.WORLD)  # expect: rendezvous setup
        _Ctx.tab = torch.tensor(_Ctx.hdl.buffer_ptrs, dtype=torch.int64, device=x.device)


def _nccl(x):
    y = x.clone()
    dist.all_reduce(y)  # expect: nccl_payload fallback
    return y


def solution(x: torch.Tensor) -> torch.Tensor:
    match x.dtype:
        case torch.bfloat16:
            _ensure(x)
            _Ctx.buf.copy_(x.flatten())
            dist.barrier()  # expect: nccl_metadata hot
            out = torch.empty_like(x)
            n = x.numel()
            _sum_peers[(triton.cdiv(n, 1024),)](_Ctx.tab, out, n, WORLD=_Ctx.hdl.world_size, BLOCK=1024)
            dist.barrier()  # expect: nccl_metadata hot
            return out
        case torch.float32:
            return _nccl(x)
        case _:
            return _nccl(x.float()).to(x.dtype)
