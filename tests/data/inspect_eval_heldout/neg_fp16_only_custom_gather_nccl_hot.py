"""All-gather. The hand-tuned path (peer copies out of symmetric memory) was only
validated for fp16 activations; every other dtype takes NCCL."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_cache = {}


def _fp16_allgather(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    key = x.shape
    if key not in _cache:
        buf = symm_mem.empty(x.shape, dtype=torch.float16, device=x.device)  # expect: rendezvous fallback
        _cache[key] = (buf, symm_mem.rendezvous(buf, dist.group.WORLD.group_name))  # expect: rendezvous fallback
    buf, hdl = _cache[key]
    buf.copy_(x)
    hdl.barrier(channel=0)
    rows = x.shape[0]
    for r in range(hdl.world_size):
        if r == hdl.rank:
            out[r * rows:(r + 1) * rows].copy_(x)
        else:
            out[r * rows:(r + 1) * rows].copy_(hdl.get_buffer(r, x.shape, torch.float16))  # expect: copy_engine fallback
    hdl.barrier(channel=1)
    return out


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    x = tensor.contiguous()
    out = x.new_empty((world * x.shape[0], *x.shape[1:]))
    if x.dtype == torch.float16:
        return _fp16_allgather(x, out)
    dist.all_gather_into_tensor(out, x)  # expect: nccl_payload hot
    return out
