import torch
import triton
import triton.language as tl


@triton.jit
def _tile(acc, a, b):
    return acc + tl.dot(a, b)


@triton.jit
def gemm_pull_kernel(a_ptr, peer_ptrs, c_ptr, M, K, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * BLOCK + tl.arange(0, BLOCK)
    cols = tl.arange(0, BLOCK)
    remote = tl.load(peer_ptrs + 1).to(tl.pointer_type(tl.float16))
    b = tl.load(remote + rows[:, None] * K + cols[None, :])
    a = tl.load(a_ptr + rows[:, None] * K + cols[None, :])
    acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
    acc = _tile(acc, a, b)
    c = tl.dot(a, b, acc)
    tl.store(c_ptr + rows[:, None] * K + cols[None, :], c)


def solution(a: torch.Tensor, ptrs: torch.Tensor) -> torch.Tensor:
    c = torch.empty_like(a)
    grid = (triton.cdiv(a.shape[0], 64),)
    gemm_pull_kernel[grid](a, ptrs, c, a.shape[0], a.shape[1], BLOCK=64)
    return c
