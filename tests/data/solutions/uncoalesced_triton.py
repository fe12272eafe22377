import torch
import triton
import triton.language as tl


@triton.jit
def column_pull(remote_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    col = tl.load(remote_ptr + offs * stride, mask=mask)
    row = tl.load(remote_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, col + row, mask=mask)


def solution(x: torch.Tensor, remote: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    column_pull[(triton.cdiv(x.numel(), 256),)](remote, out, x.numel(), x.stride(0), BLOCK=256)
    return out
