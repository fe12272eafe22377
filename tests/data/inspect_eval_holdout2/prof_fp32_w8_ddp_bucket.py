# profile: dtype=float32 world_size=8
"""DDP gradient-bucket all-reduce (average). fp32 buckets use a two-shot peer
reduce-scatter + all-gather through cuda-python IPC and one Triton kernel; half
precision buckets and odd sizes use NCCL."""
import torch
import torch.distributed as dist
import triton
import triton.language as tl
from cuda import cudart

_IPC = {}


@triton.jit
def _reduce_slice(ptrs, dst_ptrs, n_slice, rank, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = rank * n_slice + pid * BLOCK + tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for r in tl.static_range(WORLD):
        p = tl.load(ptrs + r).to(tl.pointer_type(tl.float32))
        acc += tl.load(p + offs)
    for r in tl.static_range(WORLD):
        q = tl.load(dst_ptrs + r).to(tl.pointer_type(tl.float32))
        tl.store(q + offs, acc)


def _open(n: int, device: torch.device):
    if n in _IPC:
        return _IPC[n]
    world, rank = dist.get_world_size(), dist.get_rank()
    src = torch.empty(n, dtype=torch.float32, device=device)
    dst = torch.empty(n, dtype=torch.float32, device=device)
    handles = []
    for t in (src, dst):
        err, h = cudart.cudaIpcGetMemHandle(t.data_ptr())  # expect: rendezvous setup
        handles.append(bytes(h.reserved))
    table = [None] * world
    dist.all_gather_object(table, handles)  # expect: nccl_metadata setup
    ptrs = [[], []]
    for r in range(world):
        for k, t in enumerate((src, dst)):
            if r == rank:
                ptrs[k].append(t.data_ptr())
                continue
            h = cudart.cudaIpcMemHandle_t()
            h.reserved = table[r][k]
            err, p = cudart.cudaIpcOpenMemHandle(h, cudart.cudaIpcMemLazyEnablePeerAccess)  # expect: rendezvous setup
            ptrs[k].append(int(p))
    _IPC[n] = (src, dst, torch.tensor(ptrs[0], device=device), torch.tensor(ptrs[1], device=device))
    return _IPC[n]


def solution(bucket: torch.Tensor) -> torch.Tensor:
    world, rank = dist.get_world_size(), dist.get_rank()
    n = bucket.numel()
    if bucket.dtype in (torch.bfloat16, torch.float16) or n % (world * 1024):
        out = bucket.clone()
        dist.all_reduce(out)  # expect: nccl_payload fallback
        return out.div_(world)
    src, dst, sp, dp = _open(n, bucket.device)
    src.copy_(bucket.view(-1))
    torch.cuda.current_stream().synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    n_slice = n // world
    _reduce_slice[(n_slice // 1024,)](sp, dp, n_slice, rank, WORLD=world, BLOCK=1024)
    torch.cuda.current_stream().synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    return dst.view_as(bucket) / world
