# profile: dtype=float16 world_size=8
"""All-reduce for fp16 tensors with a Triton kernel reading the peers' symmetric
buffers. bf16 inputs go through NCCL (bf16 rounding of the fp32 sum would otherwise
differ from the reference's)."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
import triton
import triton.language as tl


@triton.jit
def _allreduce_fp16(ptrs, out, n, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for r in tl.static_range(WORLD):
        p = tl.load(ptrs + r).to(tl.pointer_type(tl.float16))
        acc += tl.load(p + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out + offs, acc.to(tl.float16), mask=mask)


class _Fp16AllReduce:
    instance = None

    def __init__(self, numel: int, device: torch.device):
        self.numel = numel
        self.buf = symm_mem.empty(numel, dtype=torch.float16, device=device)  # expect: rendezvous setup
        self.hdl = symm_mem.rendezvous(self.buf, dist.group.WORLD.group_name)  # expect: rendezvous setup
        self.ptrs = torch.tensor(self.hdl.buffer_ptrs, dtype=torch.int64, device=device)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        self.buf.copy_(x.view(-1))
        self.hdl.barrier(channel=0)
        out = torch.empty_like(x)
        _allreduce_fp16[(triton.cdiv(self.numel, 4096),)](self.ptrs, out, self.numel,
                                                          WORLD=self.hdl.world_size, BLOCK=4096)
        self.hdl.barrier(channel=1)
        return out


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    x = tensor.contiguous()
    if x.dtype is torch.float16:
        if _Fp16AllReduce.instance is None or _Fp16AllReduce.instance.numel != x.numel():
            _Fp16AllReduce.instance = _Fp16AllReduce(x.numel(), x.device)
        return _Fp16AllReduce.instance(x)
    out = x.clone()
    dist.all_reduce(out)  # expect: nccl_payload fallback
    return out
