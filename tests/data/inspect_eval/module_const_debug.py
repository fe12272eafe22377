import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
import triton
import triton.language as tl

DEBUG = False
VERIFY_AGAINST_NCCL = False
_WS = {}


@triton.jit
def _allgather_pull(tab, out, n, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    for r in tl.static_range(WORLD):
        src = tl.load(tab + r).to(tl.pointer_type(tl.bfloat16))
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out + r * n + offs, tl.load(src + offs, mask=m), mask=m)


def solution(x: torch.Tensor) -> torch.Tensor:
    key = x.numel()
    if key not in _WS:
        b = symm_mem.empty(key, dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        h = symm_mem.rendezvous(b, dist.group.WORLD)  # expect: rendezvous setup
        _WS[key] = (b, h, torch.tensor(h.buffer_ptrs, dtype=torch.int64, device=x.device))
    buf, hdl, tab = _WS[key]
    buf.copy_(x.view(-1))
    if DEBUG:
        torch.cuda.synchronize()
        dist.barrier()  # expect: nccl_metadata fallback
        print(f"[rank {hdl.rank}] staged {key} elements")
    hdl.barrier(channel=0)
    out = torch.empty(hdl.world_size * key, dtype=x.dtype, device=x.device)
    _allgather_pull[(triton.cdiv(key, 2048),)](tab, out, key, WORLD=hdl.world_size, BLOCK=2048)
    hdl.barrier(channel=0)
    if VERIFY_AGAINST_NCCL:
        ref = torch.empty_like(out)
        dist.all_gather_into_tensor(ref, x.view(-1))  # expect: nccl_payload fallback
        torch.testing.assert_close(out, ref)
    return out.view(-1, *x.shape[1:])
