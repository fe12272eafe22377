# profile: dtype=float32 world_size=8
"""All-reduce for fp32 master gradients.

fp32 goes through symmetric memory and the built-in one-shot kernel; bf16 is left to
NCCL (its kernels reduce bf16 in fp32 already) and everything else also uses NCCL."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_WS = {}


def _workspace(numel: int, dtype: torch.dtype, device: torch.device):
    key = (numel, dtype)
    ws = _WS.get(key)
    if ws is None:
        group_name = dist.group.WORLD.group_name
        symm_mem.enable_symm_mem_for_group(group_name)
        buf = symm_mem.empty(numel, dtype=dtype, device=device)  # expect: rendezvous setup
        symm_mem.rendezvous(buf, group_name)  # expect: rendezvous setup
        ws = _WS[key] = (buf, group_name)
    return ws


def _nccl(t: torch.Tensor) -> torch.Tensor:
    out = t.clone()
    dist.all_reduce(out)  # expect: nccl_payload fallback
    return out


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    if tensor.dtype == torch.bfloat16:
        return _nccl(tensor)
    elif tensor.dtype == torch.float32:
        buf, group_name = _workspace(tensor.numel(), tensor.dtype, tensor.device)
        buf.copy_(tensor.reshape(-1))
        out = torch.ops.symm_mem.one_shot_all_reduce(buf, "sum", group_name)
        return out.view_as(tensor)
    else:
        return _nccl(tensor)
