"""Reduce-scatter: peers' IPC buffers are wrapped as CuPy arrays (UnownedMemory) and
turned into torch tensors via DLPack; each rank copies its slice from every peer into
a local [W, shard] stage and sums it."""
import cupy as cp
import torch
import torch.distributed as dist

_ctx = {}


def _peer_tensor(ptr: int, numel: int, dev: int) -> torch.Tensor:
    mem = cp.cuda.UnownedMemory(ptr, numel * 2, owner=None, device_id=dev)
    arr = cp.ndarray((numel,), dtype=cp.uint16, memptr=cp.cuda.MemoryPointer(mem, 0))
    return torch.from_dlpack(arr).view(torch.bfloat16)


def _setup(x: torch.Tensor):
    if not _ctx:
        rank, world = dist.get_rank(), dist.get_world_size()
        local = torch.empty(x.numel(), dtype=x.dtype, device=x.device)
        h = cp.cuda.runtime.ipcGetMemHandle(local.data_ptr())  # expect: rendezvous setup
        hs = [None] * world
        dist.all_gather_object(hs, h)  # expect: nccl_metadata setup
        peers = []
        for r in range(world):
            if r == rank:
                peers.append(local)
            else:
                p = cp.cuda.runtime.ipcOpenMemHandle(hs[r])  # expect: rendezvous setup
                peers.append(_peer_tensor(p, x.numel(), x.device.index))
        _ctx.update(local=local, peers=peers, rank=rank, world=world)
    return _ctx


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    if tensor.dtype != torch.bfloat16:
        raise TypeError("this kernel handles bf16 only")
    c = _setup(tensor)
    rank, world = c["rank"], c["world"]
    c["local"].copy_(tensor.reshape(-1))
    torch.cuda.synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    shard = tensor.numel() // world
    stage = torch.empty(world, shard, dtype=tensor.dtype, device=tensor.device)
    for r, peer in enumerate(c["peers"]):
        stage[r].copy_(peer[rank * shard:(rank + 1) * shard])  # expect: copy_engine hot
    out = stage.float().sum(0).to(tensor.dtype)
    torch.cuda.synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    return out.view(tensor.shape[0] // world, *tensor.shape[1:])
