import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_H = {}


def _nccl_reduce_scatter(x: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    out = torch.empty((x.shape[0] // world, x.shape[1]), dtype=x.dtype, device=x.device)
    dist.reduce_scatter_tensor(out, x.contiguous())  # expect: nccl_payload fallback
    return out


def solution(x: torch.Tensor) -> torch.Tensor:
    if not torch.cuda.is_available() or not x.is_cuda:
        return _nccl_reduce_scatter(x)
    if torch.cuda.get_device_capability(x.device) < (9, 0):
        return _nccl_reduce_scatter(x)
    rank = dist.get_rank()
    world = dist.get_world_size()
    if "h" not in _H:
        _H["b"] = symm_mem.empty(x.shape, dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        _H["h"] = symm_mem.rendezvous(_H["b"], dist.group.WORLD.group_name)  # expect: rendezvous setup
    buf, hdl = _H["b"], _H["h"]
    buf.copy_(x)
    hdl.barrier()
    rows = x.shape[0] // world
    mine = slice(rank * rows, (rank + 1) * rows)
    acc = x[mine].float()
    scratch = torch.empty((rows, x.shape[1]), dtype=x.dtype, device=x.device)
    for off in range(1, world):
        src = hdl.get_buffer((rank + off) % world, tuple(x.shape), x.dtype)
        scratch.copy_(src[mine])  # expect: copy_engine hot
        acc += scratch.float()
    hdl.barrier()
    return acc.to(x.dtype)
