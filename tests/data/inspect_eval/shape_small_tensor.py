import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
import triton
import triton.language as tl

_SMALL = 4096
_ws = {}


@triton.jit
def _two_shot_rs(tab, acc_ptr, chunk, rank, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < chunk
    s = tl.zeros([BLOCK], tl.float32)
    for r in tl.static_range(WORLD):
        p = tl.load(tab + r).to(tl.pointer_type(tl.bfloat16))
        s += tl.load(p + rank * chunk + offs, mask=m).to(tl.float32)
    tl.store(acc_ptr + offs, s.to(tl.bfloat16), mask=m)


def _get_ws(x):
    ws = _ws.get(x.numel())
    if ws is None:
        buf = symm_mem.empty(x.numel(), dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        hdl = symm_mem.rendezvous(buf, dist.group.WORLD)  # expect: rendezvous setup
        ws = _ws[x.numel()] = (buf, hdl, torch.tensor(hdl.buffer_ptrs, device=x.device))
    return ws


def solution(x: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    if x.numel() < _SMALL:
        out = x.clone()
        dist.all_reduce(out)  # expect: nccl_payload fallback
        return out
    buf, hdl, tab = _get_ws(x)
    buf.copy_(x.view(-1))
    dist.barrier()  # expect: nccl_metadata hot
    chunk = x.numel() // world
    mine = torch.empty(chunk, dtype=x.dtype, device=x.device)
    _two_shot_rs[(triton.cdiv(chunk, 1024),)](tab, mine, chunk, hdl.rank, WORLD=world, BLOCK=1024)
    out = torch.empty(x.numel(), dtype=x.dtype, device=x.device)
    dist.all_gather_into_tensor(out, mine)  # expect: nccl_payload hot
    return out.view_as(x)
