import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_BUF = {}


def _symm_out(x, world):
    key = (x.shape, x.dtype, world)
    if key not in _BUF:
        t = symm_mem.empty((world, *x.shape), dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        _BUF[key] = (t, symm_mem.rendezvous(t, dist.group.WORLD))  # expect: rendezvous setup
    return _BUF[key]


@torch.no_grad()
def solution(x: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    if world == 1:
        return x.clone()
    if world <= 2:
        # P2P over a single NVLink hop does not beat NCCL, keep it simple
        out = torch.empty((world * x.shape[0], *x.shape[1:]), dtype=x.dtype, device=x.device)
        dist.all_gather_into_tensor(out, x)  # expect: nccl_payload fallback
        return out
    buf, hdl = _symm_out(x, world)
    rank = hdl.rank
    dist.barrier()  # expect: nccl_metadata hot
    for peer in range(world):
        if peer == rank:
            buf[rank].copy_(x)
        else:
            hdl.get_buffer(peer, (world, *x.shape), x.dtype)[rank].copy_(x)  # expect: copy_engine hot
    torch.cuda.current_stream().synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    return buf.reshape(world * x.shape[0], *x.shape[1:]).clone()
