"""PKB 8 (alltoall) through torch symmetric memory with copy-engine peer copies.

A symmetric buffer shaped like the input (viewed as [W, chunk]) is allocated with
symm_mem.empty and rendezvoused once (cached), together with a view of every peer's buffer
(hdl.get_buffer). Each call: stage the input into this rank's buffer (one copy),
hdl.barrier(), then pull chunk `rank` of every peer's buffer into slot `peer` of the output
with W cudaMemcpyAsync device-to-device copies over NVLink (peers visited in a rotated order
starting at rank + 1 so that the ranks do not all read from the same GPU at once), and a
final hdl.barrier() so that no rank restages its buffer while a peer still reads it. At
W = 1 it is a staging copy, a self copy and two barriers.

Timeline behaviour: W + 1 memcpys (DtoD, copy engine) + 2 barrier kernels per call and no
NCCL kernel.
The NCCL fallback runs only off CUDA (CPU check).
"""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_STATE = {}


def _symm_state(world_size, per_rank, dtype, device):
    key = (world_size, per_rank, dtype, device)
    state = _STATE.get(key)
    if state is None:
        buf = symm_mem.empty((world_size, per_rank), dtype=dtype, device=device)
        hdl = symm_mem.rendezvous(buf, dist.group.WORLD.group_name)
        peers = [hdl.get_buffer(r, (world_size, per_rank), dtype) for r in range(world_size)]
        state = _STATE[key] = (buf, hdl, peers)
    return state


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    if not tensor.is_cuda:  # CPU check: plain all-to-all
        out = torch.empty_like(tensor)
        dist.all_to_all_single(out, tensor)
        return out

    world_size = dist.get_world_size()
    rank = dist.get_rank()
    x = tensor.contiguous().view(world_size, -1)
    buf, hdl, peers = _symm_state(world_size, x.shape[1], x.dtype, x.device)
    out = torch.empty_like(tensor)
    out2d = out.view(world_size, -1)

    buf.copy_(x)
    hdl.barrier(channel=0)  # every rank's input is staged
    for step in range(world_size):
        src = (rank + 1 + step) % world_size
        out2d[src].copy_(peers[src][rank])  # rank src's chunk for this rank
    hdl.barrier(channel=0)  # peers are done reading this rank's buffer
    return out
