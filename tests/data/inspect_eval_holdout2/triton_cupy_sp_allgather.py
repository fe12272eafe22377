"""Megatron sequence-parallel all-gather of [S/W, H] activations into [S, H].
CuPy opens the IPC windows; a Triton kernel pulls every peer's shard. Shapes the
kernel cannot tile fall back to CuPy async copies from the peer windows."""
import cupy as cp
import torch
import torch.distributed as dist
import triton
import triton.language as tl

_CTX = {}


@triton.jit
def _pull(ptrs, out_ptr, n_per_rank, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    r = tl.program_id(1)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    src = tl.load(ptrs + r).to(tl.pointer_type(tl.bfloat16))
    vals = tl.load(src + offs)
    tl.store(out_ptr + r * n_per_rank + offs, vals)


def _ipc_ctx(nbytes: int, device: torch.device) -> dict:
    if not _CTX:
        rank, world = dist.get_rank(), dist.get_world_size()
        stage = torch.empty(nbytes, dtype=torch.uint8, device=device)
        h = cp.cuda.runtime.ipcGetMemHandle(stage.data_ptr())  # expect: rendezvous setup
        all_h = [None] * world
        dist.all_gather_object(all_h, (rank, h))  # expect: nccl_metadata setup
        ptrs = []
        for r, hr in sorted(all_h):
            ptrs.append(stage.data_ptr() if r == rank else cp.cuda.runtime.ipcOpenMemHandle(hr))  # expect: rendezvous setup
        _CTX.update(stage=stage, ptrs=ptrs, ptr_dev=torch.tensor(ptrs, dtype=torch.int64, device=device))
    return _CTX


def solution(shard: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    n = shard.numel()
    nbytes = n * shard.element_size()
    ctx = _ipc_ctx(nbytes, shard.device)
    ctx["stage"][:nbytes].copy_(shard.view(-1).view(torch.uint8))
    torch.cuda.current_stream().synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    out = torch.empty((world * shard.shape[0], shard.shape[1]), dtype=shard.dtype, device=shard.device)
    BLOCK = 1024
    if shard.dtype == torch.bfloat16 and n % BLOCK == 0:
        _pull[(n // BLOCK, world)](ctx["ptr_dev"], out, n, BLOCK=BLOCK)
    else:
        stream = torch.cuda.current_stream().cuda_stream
        kind = cp.cuda.runtime.memcpyDeviceToDevice
        for r in range(world):
            cp.cuda.runtime.memcpyAsync(out.data_ptr() + r * nbytes, ctx["ptrs"][r], nbytes, kind, stream)  # expect: copy_engine fallback
    torch.cuda.current_stream().synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    return out
