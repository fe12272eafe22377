"""Int8-quantised gradient all-reduce: per-row scales, an int8 payload all-gathered
with NCCL, dequantised and summed locally. The explicit cudaMemcpyAsync calls are a
device-local staging copy and a host-to-device upload of a column mask."""
import numpy as np
import torch
import torch.distributed as dist
from cuda import cudart

_STAGE = {}


def _staging(n: int, device: torch.device) -> torch.Tensor:
    if n not in _STAGE:
        _STAGE[n] = torch.empty(n, dtype=torch.int8, device=device)
    return _STAGE[n]


def solution(grad: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    rows, cols = grad.shape
    g = grad.float()
    scale = g.abs().amax(dim=1).clamp_min(1e-8) / 127.0
    q = torch.round(g / scale[:, None]).to(torch.int8)
    stage = _staging(q.numel(), grad.device)
    stream = torch.cuda.current_stream().cuda_stream
    d2d = cudart.cudaMemcpyKind.cudaMemcpyDeviceToDevice
    (err,) = cudart.cudaMemcpyAsync(stage.data_ptr(), q.data_ptr(), q.numel(), d2d, stream)
    host_mask = np.ones(cols, dtype=np.float32)
    mask = torch.empty(cols, dtype=torch.float32, device=grad.device)
    h2d = cudart.cudaMemcpyKind.cudaMemcpyHostToDevice
    (err,) = cudart.cudaMemcpyAsync(mask.data_ptr(), host_mask.ctypes.data, host_mask.nbytes, h2d, stream)
    all_q = torch.empty((world, q.numel()), dtype=torch.int8, device=grad.device)
    all_s = torch.empty((world, rows), dtype=torch.float32, device=grad.device)
    dist.all_gather_into_tensor(all_q, stage)  # expect: nccl_payload hot
    dist.all_gather_into_tensor(all_s, scale.contiguous())  # expect: nccl_payload hot
    deq = all_q.view(world, rows, cols).float() * all_s[:, :, None]
    out = deq.sum(0) * mask[None, :]
    res = torch.empty_like(grad)
    res.copy_(out)
    return res
