import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
import triton
import triton.language as tl

_SUPPORTED = (torch.bfloat16, torch.float16)
_CACHE = {}


@triton.jit
def _pull_all(ptr_table, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    src = tl.program_id(1)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    base = tl.load(ptr_table + src).to(tl.pointer_type(tl.bfloat16))
    vals = tl.load(base + offs, mask=mask)
    tl.store(out_ptr + src * n + offs, vals, mask=mask)


def _state(x):
    key = (x.numel(), x.dtype)
    if key not in _CACHE:
        buf = symm_mem.empty(x.numel(), dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        hdl = symm_mem.rendezvous(buf, "0")  # expect: rendezvous setup
        table = torch.tensor(hdl.buffer_ptrs, device=x.device, dtype=torch.int64)
        _CACHE[key] = (buf, hdl, table)
    return _CACHE[key]


def solution(x: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    out_shape = (world * x.shape[0],) + tuple(x.shape[1:])
    if x.dtype not in _SUPPORTED:
        out = torch.empty(out_shape, dtype=x.dtype, device=x.device)
        dist.all_gather_into_tensor(out, x.contiguous())  # expect: nccl_payload fallback
        return out

    buf, hdl, table = _state(x)
    buf.copy_(x.reshape(-1))
    hdl.barrier(channel=0)
    n = x.numel()
    out = torch.empty(out_shape, dtype=x.dtype, device=x.device)
    _pull_all[(triton.cdiv(n, 4096), world)](table, out, n, BLOCK=4096)
    hdl.barrier(channel=0)
    return out
