"""Column-partitioned halo exchange: each rank owns a block of columns and needs the
last H columns of its left neighbour and the first H columns of its right neighbour
(periodic). A strided cudaMemcpy2DAsync pulls each halo from the peer's symmetric
buffer in one call."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from cuda import cudart

_H = 4
_slot = None


def _symm(x: torch.Tensor):
    global _slot
    if _slot is None or _slot[0].shape != x.shape:
        buf = symm_mem.empty(x.shape, dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        _slot = (buf, symm_mem.rendezvous(buf, dist.group.WORLD.group_name))  # expect: rendezvous setup
    return _slot


def _copy2d(dst: int, dpitch: int, src: int, spitch: int, width: int, height: int, stream: int):
    (err,) = cudart.cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height,  # expect: copy_engine hot
                                      cudart.cudaMemcpyKind.cudaMemcpyDefault, stream)
    if err != cudart.cudaError_t.cudaSuccess:
        raise RuntimeError(f"cudaMemcpy2DAsync: {err}")


@torch.no_grad()
def solution(x: torch.Tensor) -> torch.Tensor:
    rank, world = dist.get_rank(), dist.get_world_size()
    x = x.contiguous()
    rows, cols = x.shape
    es = x.element_size()
    buf, hdl = _symm(x)
    buf.copy_(x)
    hdl.barrier(channel=0)

    out = torch.empty(rows, cols + 2 * _H, dtype=x.dtype, device=x.device)
    out[:, _H:_H + cols] = x
    stream = torch.cuda.current_stream().cuda_stream
    left, right = (rank - 1) % world, (rank + 1) % world
    dpitch, spitch = out.stride(0) * es, cols * es
    # left halo <- last _H columns of the left neighbour
    _copy2d(out.data_ptr(), dpitch, hdl.buffer_ptrs[left] + (cols - _H) * es, spitch, _H * es, rows, stream)
    # right halo <- first _H columns of the right neighbour
    _copy2d(out.data_ptr() + (_H + cols) * es, dpitch, hdl.buffer_ptrs[right], spitch, _H * es, rows, stream)
    hdl.barrier(channel=1)
    return out
