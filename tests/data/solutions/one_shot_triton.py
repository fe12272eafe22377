import torch
import triton
import triton.language as tl
from utils.triton_utils import blockwise_barrier


@triton.jit
def one_shot_kernel(buffer_ptrs, signal_pad_ptrs, out_ptr, numel, rank, world_size,
                    BLOCK: tl.constexpr):
    blockwise_barrier(signal_pad_ptrs, None, rank, world_size, sem="relaxed")
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < numel
    buffer_ptrs = buffer_ptrs.to(tl.pointer_type(tl.uint64))
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for i in range(world_size):
        src = tl.load(buffer_ptrs + i).to(tl.pointer_type(tl.float32))
        acc += tl.load(src + offsets, mask=mask)
    tl.store(out_ptr + offsets, acc, mask=mask)


def solution(x: torch.Tensor, hdl) -> torch.Tensor:
    out = torch.empty_like(x)
    grid = lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)  # noqa: E731
    one_shot_kernel[grid](hdl.buffer_ptrs_dev, hdl.signal_pad_ptrs_dev, out, x.numel(),
                          hdl.rank, hdl.world_size, BLOCK=1024)
    return out
