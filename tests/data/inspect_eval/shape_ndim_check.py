"""All-to-all of column blocks: one strided 2-D copy per peer (cupy memcpy2DAsync)."""
import cupy as cp
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_RT = cp.cuda.runtime
_state = {}


def _nccl_all_to_all(x):
    world = dist.get_world_size()
    send = list(x.chunk(world, dim=-1))
    recv = [torch.empty_like(s) for s in send]
    dist.all_to_all(recv, [s.contiguous() for s in send])  # expect: nccl_payload fallback
    return torch.cat(recv, dim=-1)


def _recv_buffer(x):
    key = (tuple(x.shape), x.dtype)
    if key in _state:
        return _state[key]
    buf = symm_mem.empty(x.shape, dtype=x.dtype, device=x.device)  # expect: rendezvous setup
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD)  # expect: rendezvous setup
    _state[key] = (buf, hdl)
    return buf, hdl


def solution(x: torch.Tensor) -> torch.Tensor:
    if x.dim() != 2 or x.size(-1) % 128 != 0:
        return _nccl_all_to_all(x)
    buf, hdl = _recv_buffer(x)
    rank, world = hdl.rank, hdl.world_size
    rows, cols = x.shape
    blk = cols // world
    esz = x.element_size()
    pitch = cols * esz
    stream = torch.cuda.current_stream().cuda_stream
    dist.barrier()  # expect: nccl_metadata hot
    for peer in range(world):
        src = x.data_ptr() + peer * blk * esz
        dst = hdl.buffer_ptrs[peer] + rank * blk * esz
        _RT.memcpy2DAsync(dst, pitch, src, pitch, blk * esz, rows, _RT.memcpyDeviceToDevice, stream)  # expect: copy_engine hot
    torch.cuda.current_stream().synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    return buf.clone()
