# profile: dtype=float16 world_size=8
"""ZeRO-3 style parameter all-gather. float16 shards are pushed into every peer's
symmetric buffer with copy_ (copy engine); bfloat16 uses functional collectives and
everything else plain NCCL."""
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
import torch.distributed._symmetric_memory as symm_mem

_WIN = {}


def _window(shape, dtype, device):
    key = (shape, dtype)
    if key not in _WIN:
        world = dist.get_world_size()
        buf = symm_mem.empty((world,) + tuple(shape), dtype=dtype, device=device)  # expect: rendezvous setup
        hdl = symm_mem.rendezvous(buf, group=dist.group.WORLD)  # expect: rendezvous setup
        _WIN[key] = (buf, hdl)
    return _WIN[key]


def _push_all(shard: torch.Tensor) -> torch.Tensor:
    world, rank = dist.get_world_size(), dist.get_rank()
    buf, hdl = _window(tuple(shard.shape), shard.dtype, shard.device)
    hdl.barrier(channel=0)
    for peer in range(world):
        if peer == rank:
            buf[rank].copy_(shard)
        else:
            dst = hdl.get_buffer(peer, (world,) + tuple(shard.shape), shard.dtype)
            dst[rank].copy_(shard, non_blocking=True)  # expect: copy_engine hot
    hdl.barrier(channel=1)
    return buf.clone()


def solution(param_shard: torch.Tensor) -> torch.Tensor:
    match param_shard.dtype:
        case torch.float16:
            gathered = _push_all(param_shard)
        case torch.bfloat16:
            gathered = funcol.all_gather_tensor(param_shard, 0, dist.group.WORLD)  # expect: nccl_payload fallback
            gathered = gathered.view(-1, *param_shard.shape)
        case _:
            world = dist.get_world_size()
            gathered = param_shard.new_empty((world,) + tuple(param_shard.shape))
            dist.all_gather_into_tensor(gathered, param_shard)  # expect: nccl_payload fallback
    return gathered.reshape(-1, param_shard.shape[-1])
