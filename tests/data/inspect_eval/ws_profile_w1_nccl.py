# profile: world_size=1
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
import triton
import triton.language as tl


@triton.jit
def _ar_kernel(tab, out, n, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    acc = tl.zeros([BLOCK], tl.float32)
    for r in tl.static_range(WORLD):
        acc += tl.load(tl.load(tab + r).to(tl.pointer_type(tl.bfloat16)) + offs, mask=m).to(tl.float32)
    tl.store(out + offs, acc.to(tl.bfloat16), mask=m)


_state = None


def solution(x: torch.Tensor) -> torch.Tensor:
    global _state
    world = dist.get_world_size()
    if world == 1:
        # nothing to exchange; NCCL handles the degenerate group cheaply
        out = x.clone()
        dist.all_reduce(out)  # expect: nccl_payload hot
        return out
    if _state is None:
        buf = symm_mem.empty(x.numel(), dtype=x.dtype, device=x.device)  # expect: rendezvous fallback
        hdl = symm_mem.rendezvous(buf, dist.group.WORLD)  # expect: rendezvous fallback
        _state = (buf, hdl, torch.tensor(hdl.buffer_ptrs, device=x.device, dtype=torch.int64))
    buf, hdl, tab = _state
    buf.copy_(x.view(-1))
    dist.barrier()  # expect: nccl_metadata fallback
    out = torch.empty_like(x)
    _ar_kernel[(triton.cdiv(x.numel(), 1024),)](tab, out, x.numel(), WORLD=world, BLOCK=1024)
    dist.barrier()  # expect: nccl_metadata fallback
    return out
