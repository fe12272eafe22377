"""RoPE on a sequence shard of keys, then an all-gather of the rotated keys.
Fast path: copy-engine pushes into every rank's symmetric buffer. Any failure
(no symmetric memory support) falls back to NCCL."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_SYMM = {}


def _rope(x: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    s, d = x.shape
    rank = dist.get_rank()
    pos = torch.arange(rank * s, (rank + 1) * s, device=x.device, dtype=torch.float32)
    inv = base ** (-torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d)
    ang = pos[:, None] * inv[None, :]
    x1, x2 = x.float()[:, 0::2], x.float()[:, 1::2]
    out = torch.stack([x1 * ang.cos() - x2 * ang.sin(), x1 * ang.sin() + x2 * ang.cos()], dim=-1)
    return out.flatten(1).to(x.dtype)


def _symm_buf(shape, dtype, device):
    if "buf" not in _SYMM:
        world = dist.get_world_size()
        _SYMM["buf"] = symm_mem.empty((world, *shape), dtype=dtype, device=device)  # expect: rendezvous setup
        _SYMM["hdl"] = symm_mem.rendezvous(_SYMM["buf"], dist.group.WORLD.group_name)  # expect: rendezvous setup
    return _SYMM["buf"], _SYMM["hdl"]


def solution(k: torch.Tensor) -> torch.Tensor:
    world, rank = dist.get_world_size(), dist.get_rank()
    rk = _rope(k)
    try:
        buf, hdl = _symm_buf(tuple(rk.shape), rk.dtype, rk.device)
        hdl.barrier(channel=0)
        for peer in range(world):
            dst = hdl.get_buffer(peer, buf.shape, buf.dtype)
            dst[rank].copy_(rk)  # expect: copy_engine hot
        hdl.barrier(channel=1)
    except (RuntimeError, AttributeError):
        out = rk.new_empty((world * rk.shape[0], rk.shape[1]))
        dist.all_gather_into_tensor(out, rk)  # expect: nccl_payload fallback
        return out
    else:
        out = buf.reshape(-1, rk.shape[1]).clone()
        # keep peers from overwriting buf before everyone has copied it out
        dist.barrier()  # expect: nccl_metadata hot
    return out
