"""All-gather: peers' IPC buffers are wrapped as torch tensors (via CuPy) and copied with copy_()."""
import cupy as cp
import torch
import torch.distributed as dist

_views = None
_mine = None


def _wrap_peer(ptr, numel, device_id):
    mem = cp.cuda.UnownedMemory(ptr, numel * 2, owner=None, device_id=device_id)
    arr = cp.ndarray((numel,), dtype=cp.uint16, memptr=cp.cuda.MemoryPointer(mem, 0))
    return torch.as_tensor(arr, device=f"cuda:{torch.cuda.current_device()}").view(torch.bfloat16)


def _setup(x):
    global _views, _mine
    if _views is None:
        _mine = torch.empty(x.numel(), dtype=x.dtype, device=x.device)
        h = cp.cuda.runtime.ipcGetMemHandle(_mine.data_ptr())  # expect: rendezvous setup
        all_h = [None] * dist.get_world_size()
        dist.all_gather_object(all_h, h)  # expect: nccl_metadata setup
        me = dist.get_rank()
        _views = {}
        for r, hr in enumerate(all_h):
            if r != me:
                ptr = cp.cuda.runtime.ipcOpenMemHandle(hr)  # expect: rendezvous setup
                _views[r] = _wrap_peer(ptr, x.numel(), r)
    return _mine, _views


@torch.no_grad()
def solution(x: torch.Tensor) -> torch.Tensor:
    mine, views = _setup(x)
    world, me = dist.get_world_size(), dist.get_rank()
    mine.copy_(x.view(-1))
    torch.cuda.synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    out = torch.empty(world, x.numel(), dtype=x.dtype, device=x.device)
    out[me].copy_(mine)
    for r, peer_t in views.items():
        out[r].copy_(peer_t)  # expect: copy_engine hot
    torch.cuda.synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    return out.view(-1, *x.shape[1:])
