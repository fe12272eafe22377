"""PKB 1 (allreduce) as a one-shot all-reduce over torch symmetric memory, summed in Triton.

A symmetric buffer per (numel, dtype, device) is allocated with symm_mem.empty and
rendezvoused once over the world group (cached). Each call: copy the input into this rank's
symmetric buffer, hdl.barrier() (every rank's data is in place), then one Triton kernel reads
element block i of every rank's buffer through the peers' pointers (hdl.buffer_ptrs, kept as
an int64 device tensor), sums in fp32 and writes the output; a second hdl.barrier() keeps
any rank from overwriting its buffer while a peer may still be reading it. No multicast /
multimem is used (plain NVLink loads); at W = 1 the kernel reads only its own buffer.

Timeline behaviour: 1 copy + 2 symmetric-memory barrier kernels + 1 Triton kernel per call,
no NCCL kernel (communication happens inside the Triton kernel as peer loads).
The PyTorch/NCCL fallback runs only off CUDA (CPU check).
"""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only machine: only the fallback below can run
    triton = None

if triton is not None:
    @triton.jit
    def _one_shot_sum_kernel(ptrs_ptr, out_ptr, n, WORLD: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for r in tl.static_range(WORLD):
            peer = tl.load(ptrs_ptr + r).to(tl.pointer_type(out_ptr.dtype.element_ty))
            acc += tl.load(peer + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_ptr + offs, acc.to(out_ptr.dtype.element_ty), mask=mask)

_STATE = {}


def _symm_buffer(numel, dtype, device):
    key = (numel, dtype, device)
    state = _STATE.get(key)
    if state is None:
        buf = symm_mem.empty(numel, dtype=dtype, device=device)
        hdl = symm_mem.rendezvous(buf, dist.group.WORLD.group_name)
        ptrs = torch.tensor(hdl.buffer_ptrs, dtype=torch.int64, device=device)
        state = _STATE[key] = (buf, hdl, ptrs)
    return state


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    if not tensor.is_cuda:  # CPU check: plain all-reduce
        out = tensor.clone()
        dist.all_reduce(out, op=dist.ReduceOp.SUM)
        return out

    x = tensor.contiguous().view(-1)
    n = x.numel()
    buf, hdl, ptrs = _symm_buffer(n, x.dtype, x.device)
    buf.copy_(x)
    hdl.barrier(channel=0)  # all ranks' inputs are in their symmetric buffers
    out = torch.empty_like(x)
    block = 4096
    _one_shot_sum_kernel[(triton.cdiv(n, block),)](ptrs, out, n, WORLD=hdl.world_size,
                                                    BLOCK=block, num_warps=8)
    hdl.barrier(channel=0)  # peers are done reading this rank's buffer
    return out.view(tensor.shape)
