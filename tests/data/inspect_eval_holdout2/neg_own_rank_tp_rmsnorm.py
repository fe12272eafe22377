"""Tensor-parallel RMSNorm: the hidden dimension is sharded, so the per-row sum of
squares is exchanged through symmetric memory and a Triton kernel reads every
peer's partial sums. Only this rank's buffer is ever written from the host side."""
import cupy as cp
import numpy as np
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
import triton
import triton.language as tl


@triton.jit
def _rms_apply(x_ptr, w_ptr, ptrs, out_ptr, H, H_total, eps, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    ss = 0.0
    for r in tl.static_range(WORLD):
        peer = tl.load(ptrs + r).to(tl.pointer_type(tl.float32))
        ss += tl.load(peer + row)
    inv = 1.0 / tl.sqrt(ss / H_total + eps)
    for start in range(0, H, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = offs < H
        x = tl.load(x_ptr + row * H + offs, mask=m).to(tl.float32)
        w = tl.load(w_ptr + offs, mask=m).to(tl.float32)
        tl.store(out_ptr + row * H + offs, (x * inv * w).to(tl.bfloat16), mask=m)


class _Exchange:
    inst = None

    def __init__(self, rows: int, device: torch.device):
        self.rank = dist.get_rank()
        self.rows = rows
        self.buf = symm_mem.empty(rows, dtype=torch.float32, device=device)  # expect: rendezvous setup
        self.hdl = symm_mem.rendezvous(self.buf, dist.group.WORLD.group_name)  # expect: rendezvous setup
        host = np.asarray(self.hdl.buffer_ptrs, dtype=np.int64)
        self.ptrs = torch.empty(host.size, dtype=torch.int64, device=device)
        cp.cuda.runtime.memcpy(self.ptrs.data_ptr(), host.ctypes.data, host.nbytes, cp.cuda.runtime.memcpyHostToDevice)

    @classmethod
    def get(cls, rows: int, device: torch.device) -> "_Exchange":
        if cls.inst is None or cls.inst.rows != rows:
            cls.inst = cls(rows, device)
        return cls.inst


def solution(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    rows, h = x.shape
    world = dist.get_world_size()
    ex = _Exchange.get(rows, x.device)
    ss = x.float().pow(2).sum(dim=-1)
    mine = ex.hdl.get_buffer(ex.rank, (rows,), torch.float32)
    mine.copy_(ss)
    ex.hdl.barrier(channel=0)
    out = torch.empty_like(x)
    w = (weight[0] if weight.dim() == 2 else weight).contiguous()
    _rms_apply[(rows,)](x, w, ex.ptrs, out, h, h * world, eps, WORLD=world, BLOCK=1024)
    ex.hdl.barrier(channel=1)
    return out
