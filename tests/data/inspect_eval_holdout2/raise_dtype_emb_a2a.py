"""TorchRec-style pooled embedding all-to-all: table-wise sharded pooled embeddings
[B_global, D_local] are redistributed to the data-parallel layout
[B_global / W, W * D_local]."""
import torch
import torch.distributed as dist

_SUPPORTED = (torch.float32, torch.bfloat16, torch.float16)


def _check(t: torch.Tensor, world: int) -> None:
    if t.dtype not in _SUPPORTED:
        raise TypeError(f"pooled embeddings must be floating point, got {t.dtype}")
    if t.dim() != 2:
        raise ValueError("expected [batch, dim]")
    if t.shape[0] % world:
        raise ValueError("the global batch must be divisible by the world size")


def solution(pooled: torch.Tensor, group=None, quantize_comm: bool = False) -> torch.Tensor:
    group = group or dist.group.WORLD
    world = dist.get_world_size(group)
    _check(pooled, world)
    b_local = pooled.shape[0] // world
    if quantize_comm:
        scale = pooled.abs().amax().float().clamp_min(1e-8) / 127.0
        q = (pooled.float() / scale).round().to(torch.int8)
        scales = torch.empty(world, dtype=torch.float32, device=pooled.device)
        dist.all_gather_into_tensor(scales, scale.reshape(1), group=group)  # expect: nccl_metadata fallback
        recv_q = torch.empty_like(q)
        dist.all_to_all_single(recv_q, q, group=group)  # expect: nccl_payload fallback
        recv = recv_q.float().view(world, b_local, -1) * scales.view(world, 1, 1)
        recv = recv.to(pooled.dtype)
    else:
        recv = torch.empty_like(pooled)
        dist.all_to_all_single(recv, pooled.contiguous(), group=group)  # expect: nccl_payload hot
        recv = recv.view(world, b_local, -1)
    return recv.permute(1, 0, 2).reshape(b_local, -1).contiguous()
