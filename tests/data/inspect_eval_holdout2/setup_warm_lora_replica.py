"""Expert-parallel grouped GEMM with a LoRA branch (forward). The LoRA A factor is
authoritative on rank 0; every other rank pulls a private replica once through
CUDA IPC (CuPy), then each call runs local GEMMs and all-reduces the LoRA delta."""
import cupy as cp
import torch
import torch.distributed as dist

_REPLICA = None
_RANK_R = 16


def _peer_tensor(ptr: int, like: torch.Tensor) -> torch.Tensor:
    nbytes = like.numel() * like.element_size()
    mem = cp.cuda.UnownedMemory(ptr, nbytes, None, torch.cuda.current_device())
    arr = cp.ndarray((like.numel(),), dtype=cp.uint16, memptr=cp.cuda.MemoryPointer(mem, 0))
    return torch.from_dlpack(arr).view(like.dtype).view(like.shape)


def _replicate(lora_a: torch.Tensor):
    rank = dist.get_rank()
    src = lora_a.contiguous().clone()
    h = cp.cuda.runtime.ipcGetMemHandle(src.data_ptr())  # expect: rendezvous setup
    box = [h if rank == 0 else None]
    dist.broadcast_object_list(box, src=0)  # expect: nccl_metadata setup
    if rank == 0:
        replica = src
    else:
        ptr = cp.cuda.runtime.ipcOpenMemHandle(box[0])  # expect: rendezvous setup
        remote = _peer_tensor(ptr, src)
        replica = torch.empty_like(src)
        replica.copy_(remote)  # expect: copy_engine setup
    torch.cuda.synchronize()
    dist.barrier()  # expect: nccl_metadata setup
    return replica, src


def solution(
    x: torch.Tensor,
    expert_w: torch.Tensor,
    lora_a: torch.Tensor,
    lora_b: torch.Tensor,
    scaling: float = 2.0,
) -> torch.Tensor:
    global _REPLICA
    if _REPLICA is None:
        _REPLICA = _replicate(lora_a)
    a_rep, _ = _REPLICA
    base = x @ expert_w.t()
    low = x @ a_rep[:_RANK_R].t()
    delta = (low @ lora_b[:, :_RANK_R].t()).float()
    dist.all_reduce(delta)  # expect: nccl_payload hot
    return (base.float() + scaling * delta / dist.get_world_size()).to(x.dtype)
