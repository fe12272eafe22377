"""Neighbour exchange (halo): peer rows exposed through __cuda_array_interface__ and copied with torch."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem


class _DevPtr:
    def __init__(self, ptr, shape):
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": tuple(shape),
                                         "typestr": "<i2", "version": 3, "strides": None}


def _as_peer_tensor(ptr, shape):
    return torch.as_tensor(_DevPtr(ptr, shape), device="cuda").view(torch.bfloat16)


_S = {}


def _state(x):
    if not _S:
        b = symm_mem.empty(x.shape, dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        h = symm_mem.rendezvous(b, dist.group.WORLD)  # expect: rendezvous setup
        left = _as_peer_tensor(h.buffer_ptrs[(h.rank - 1) % h.world_size], x.shape)
        right = _as_peer_tensor(h.buffer_ptrs[(h.rank + 1) % h.world_size], x.shape)
        _S.update(buf=b, hdl=h, left=left, right=right)
    return _S


def solution(x: torch.Tensor, halo: int = 4) -> torch.Tensor:
    s = _state(x)
    s["buf"].copy_(x)
    dist.barrier()  # expect: nccl_metadata hot
    out = torch.empty(x.shape[0] + 2 * halo, *x.shape[1:], dtype=x.dtype, device=x.device)
    out[halo:-halo].copy_(x)
    out[:halo].copy_(s["left"][-halo:])  # expect: copy_engine hot
    out[-halo:] = s["right"][:halo]  # expect: copy_engine hot
    dist.barrier()  # expect: nccl_metadata hot
    return out
