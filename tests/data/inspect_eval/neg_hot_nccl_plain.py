"""GEMM + reduce-scatter: custom Triton matmul, then NCCL reduce-scatter of the partial product."""
import torch
import torch.distributed as dist
import triton
import triton.language as tl


@triton.jit
def _mm(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        av = tl.load(a + rm[:, None] * sam + (k + rk)[None, :] * sak)
        bv = tl.load(b + (k + rk)[:, None] * sbk + rn[None, :] * sbn)
        acc += tl.dot(av, bv)
    tl.store(c + rm[:, None] * scm + rn[None, :] * scn, acc.to(tl.bfloat16))


def solution(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    M, K = A.shape
    _, N = B.shape
    C = torch.empty(M, N, dtype=A.dtype, device=A.device)
    grid = (M // 128, N // 128)
    _mm[grid](A, B, C, M, N, K, A.stride(0), A.stride(1), B.stride(0), B.stride(1),
              C.stride(0), C.stride(1), BM=128, BN=128, BK=64)
    world = dist.get_world_size()
    out = torch.empty(M // world, N, dtype=C.dtype, device=C.device)
    dist.reduce_scatter_tensor(out, C, op=dist.ReduceOp.SUM)  # expect: nccl_payload hot
    return out
