"""FP8 parameter all-gather: blockwise e4m3 quantisation (128x128 blocks); the fp8
payload and the fp32 block scales are pushed into every peer's symmetric buffers
and dequantised locally."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_BLK = 128


class _Pool:
    _payload = None
    _scales = None

    @classmethod
    def acquire(cls, shape, device):
        world = dist.get_world_size()
        if cls._payload is None:
            rows, cols = shape
            p = symm_mem.empty((world, rows, cols), dtype=torch.uint8, device=device)  # expect: rendezvous setup
            s = symm_mem.empty((world, rows // _BLK, cols // _BLK), dtype=torch.float32, device=device)  # expect: rendezvous setup
            cls._payload = (p, symm_mem.rendezvous(p, dist.group.WORLD.group_name))  # expect: rendezvous setup
            cls._scales = (s, symm_mem.rendezvous(s, dist.group.WORLD.group_name))  # expect: rendezvous setup
        return cls._payload, cls._scales


def _quant(x: torch.Tensor):
    r, c = x.shape
    blocks = x.float().reshape(r // _BLK, _BLK, c // _BLK, _BLK)
    amax = blocks.abs().amax(dim=(1, 3)).clamp_min(1e-12)
    scale = amax / 448.0
    q = (blocks / scale[:, None, :, None]).to(torch.float8_e4m3fn).reshape(r, c)
    return q.view(torch.uint8), scale


def solution(param_shard: torch.Tensor) -> torch.Tensor:
    world, rank = dist.get_world_size(), dist.get_rank()
    r, c = param_shard.shape
    assert r % _BLK == 0 and c % _BLK == 0, "shape must be a multiple of the block size"
    (pbuf, phdl), (sbuf, shdl) = _Pool.acquire((r, c), param_shard.device)
    q, scale = _quant(param_shard)
    phdl.barrier(channel=0)
    for peer in range(world):
        pdst = phdl.get_buffer(peer, pbuf.shape, torch.uint8)
        sdst = shdl.get_buffer(peer, sbuf.shape, torch.float32)
        pdst[rank].copy_(q)  # expect: copy_engine hot
        sdst[rank].copy_(scale)  # expect: copy_engine hot
    phdl.barrier(channel=1)
    deq = pbuf.view(torch.float8_e4m3fn).float().reshape(world, r // _BLK, _BLK, c // _BLK, _BLK)
    deq = deq * sbuf[:, :, None, :, None]
    return deq.reshape(world * r, c).to(param_shard.dtype)
