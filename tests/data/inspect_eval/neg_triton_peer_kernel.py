"""All-gather in a single Triton kernel: loads from peers' symmetric buffers, signal-pad barrier."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
import triton
import triton.language as tl


@triton.jit
def _ag_kernel(buf_tab, sig_tab, out, n, rank, epoch, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    if pid == 0:
        for r in tl.static_range(WORLD):
            sig = tl.load(sig_tab + r).to(tl.pointer_type(tl.int32))
            tl.atomic_xchg(sig + rank, epoch, sem="release", scope="sys")
        mine = tl.load(sig_tab + rank).to(tl.pointer_type(tl.int32))
        for r in tl.static_range(WORLD):
            while tl.atomic_add(mine + r, 0, sem="acquire", scope="sys") != epoch:
                pass
    tl.debug_barrier()
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    for r in tl.static_range(WORLD):
        src = tl.load(buf_tab + r).to(tl.pointer_type(tl.bfloat16))
        tl.store(out + r * n + offs, tl.load(src + offs, mask=m), mask=m)


_ctx = {}


def solution(x: torch.Tensor) -> torch.Tensor:
    if not _ctx:
        buf = symm_mem.empty(x.numel(), dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        hdl = symm_mem.rendezvous(buf, dist.group.WORLD)  # expect: rendezvous setup
        _ctx.update(buf=buf, hdl=hdl, epoch=0,
                    bt=torch.tensor(hdl.buffer_ptrs, dtype=torch.int64, device=x.device),
                    st=torch.tensor(hdl.signal_pad_ptrs, dtype=torch.int64, device=x.device))
    _ctx["epoch"] += 1
    hdl = _ctx["hdl"]
    _ctx["buf"].copy_(x.view(-1))
    n = x.numel()
    out = torch.empty(hdl.world_size * n, dtype=x.dtype, device=x.device)
    _ag_kernel[(triton.cdiv(n, 8192),)](_ctx["bt"], _ctx["st"], out, n, hdl.rank, _ctx["epoch"],
                                        WORLD=hdl.world_size, BLOCK=8192)
    return out.view(-1, *x.shape[1:])
