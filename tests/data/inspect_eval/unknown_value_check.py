"""bf16 one-shot all-reduce; if values are large, accumulate in fp32 through NCCL instead."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
import triton
import triton.language as tl

_BF16_SAFE = 1.0e4
_ws = {}


@triton.jit
def _one_shot(tab, out, n, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    acc = tl.zeros([BLOCK], tl.float32)
    for r in tl.static_range(WORLD):
        acc += tl.load(tl.load(tab + r).to(tl.pointer_type(tl.bfloat16)) + offs, mask=m).to(tl.float32)
    tl.store(out + offs, acc.to(tl.bfloat16), mask=m)


def _workspace(x):
    if "h" not in _ws:
        _ws["b"] = symm_mem.empty(x.numel(), dtype=x.dtype, device=x.device)  # expect: rendezvous unknown
        _ws["h"] = symm_mem.rendezvous(_ws["b"], dist.group.WORLD)  # expect: rendezvous unknown
        _ws["t"] = torch.tensor(_ws["h"].buffer_ptrs, dtype=torch.int64, device=x.device)
    return _ws["b"], _ws["h"], _ws["t"]


def solution(x: torch.Tensor) -> torch.Tensor:
    peak = x.abs().max()
    dist.all_reduce(peak, op=dist.ReduceOp.MAX)  # expect: nccl_metadata hot
    if peak.item() * dist.get_world_size() > _BF16_SAFE:
        acc = x.float()
        dist.all_reduce(acc)  # expect: nccl_payload unknown
        out = acc.to(x.dtype)
    else:
        buf, hdl, tab = _workspace(x)
        buf.copy_(x.view(-1))
        dist.barrier()  # expect: nccl_metadata unknown
        out = torch.empty_like(x)
        _one_shot[(triton.cdiv(x.numel(), 2048),)](tab, out, x.numel(), WORLD=hdl.world_size, BLOCK=2048)
    dist.barrier()  # expect: nccl_metadata hot
    return out
