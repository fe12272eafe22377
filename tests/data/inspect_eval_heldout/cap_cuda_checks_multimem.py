"""All-reduce with NVLS multimem (ld_reduce/st) through PyTorch's symmetric memory.
Multimem needs sm_90+ and CUDA tensors; CPU tensors and older GPUs fall back."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_buf = None


def _gloo_group():
    if not hasattr(_gloo_group, "pg"):
        _gloo_group.pg = dist.new_group(backend="gloo")  # expect: nccl_metadata fallback
    return _gloo_group.pg


def _symm_buffer(x: torch.Tensor) -> torch.Tensor:
    global _buf
    if _buf is None or _buf.numel() != x.numel() or _buf.dtype != x.dtype:
        _buf = symm_mem.empty(x.numel(), dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        symm_mem.rendezvous(_buf, dist.group.WORLD.group_name)  # expect: rendezvous setup
    return _buf


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    if not torch.cuda.is_available() or not tensor.is_cuda:
        out = tensor.clone()
        dist.all_reduce(out, group=_gloo_group())  # expect: nccl_payload fallback
        return out
    if torch.cuda.get_device_capability(tensor.device) < (9, 0):
        out = tensor.clone()
        dist.all_reduce(out)  # expect: nccl_payload fallback
        return out

    buf = _symm_buffer(tensor)
    buf.copy_(tensor.reshape(-1))
    torch.ops.symm_mem.multimem_all_reduce_(buf, "sum", dist.group.WORLD.group_name)
    return buf.view_as(tensor).clone()
