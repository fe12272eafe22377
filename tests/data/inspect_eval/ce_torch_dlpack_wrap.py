import cupy as cp
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.dlpack import from_dlpack

_cache = {}


def _peer_tensor(ptr, numel, dev):
    mp = cp.cuda.MemoryPointer(cp.cuda.UnownedMemory(ptr, numel * 2, None, dev), 0)
    return from_dlpack(cp.ndarray((numel,), cp.int16, mp).toDlpack()).view(torch.bfloat16)


def _rendezvous(x):
    key = x.numel()
    if key not in _cache:
        sb = symm_mem.empty(key, dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        hd = symm_mem.rendezvous(sb, dist.group.WORLD)  # expect: rendezvous setup
        peers = [_peer_tensor(p, key, r) for r, p in enumerate(hd.buffer_ptrs)]
        _cache[key] = (sb, hd, peers)
    return _cache[key]


def solution(x: torch.Tensor) -> torch.Tensor:
    """Reduce-scatter: pull my slice of every peer's input, then a local fp32 reduction."""
    sb, hd, peers = _rendezvous(x)
    w, r = hd.world_size, hd.rank
    n = x.numel() // w
    sb.copy_(x.view(-1))
    dist.barrier()  # expect: nccl_metadata hot
    gathered = torch.empty(w, n, dtype=x.dtype, device=x.device)
    for p in range(w):
        torch.Tensor.copy_(gathered[p], peers[p][r * n:(r + 1) * n], non_blocking=True)  # expect: copy_engine hot
    dist.barrier()  # expect: nccl_metadata hot
    return gathered.sum(0, dtype=torch.float32).to(x.dtype).view(-1, *x.shape[1:])
