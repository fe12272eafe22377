"""Reduce-scatter: each rank pulls its shard from every peer's IPC buffer with
cudaMemcpyAsync (cuda-python), then reduces the W slices in fp32."""
import torch
import torch.distributed as dist
from cuda import cudart

_TABLES = {}


def _check(res):
    err = res[0]
    if err != cudart.cudaError_t.cudaSuccess:
        raise RuntimeError(f"CUDA runtime error: {err}")
    return res[1] if len(res) > 1 else None


class _PeerTable:
    def __init__(self, numel: int, dtype: torch.dtype, device: torch.device):
        self.rank = dist.get_rank()
        self.world = dist.get_world_size()
        self.buf = torch.empty(numel, dtype=dtype, device=device)
        handle = _check(cudart.cudaIpcGetMemHandle(self.buf.data_ptr()))  # expect: rendezvous setup
        blobs = [None] * self.world
        dist.all_gather_object(blobs, bytes(handle.reserved))  # expect: nccl_metadata setup
        self.ptrs = []
        for r, blob in enumerate(blobs):
            if r == self.rank:
                self.ptrs.append(self.buf.data_ptr())
                continue
            h = cudart.cudaIpcMemHandle_t()
            h.reserved = blob
            flags = cudart.cudaIpcMemLazyEnablePeerAccess
            self.ptrs.append(int(_check(cudart.cudaIpcOpenMemHandle(h, flags))))  # expect: rendezvous setup


def _table(x: torch.Tensor) -> _PeerTable:
    key = (x.numel(), x.dtype, x.device)
    if key not in _TABLES:
        _TABLES[key] = _PeerTable(*key)
    return _TABLES[key]


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    out_shape = (tensor.shape[0] // world, *tensor.shape[1:])
    try:
        t = _table(tensor)
        t.buf.copy_(tensor.reshape(-1))
        torch.cuda.synchronize()
        dist.barrier()  # expect: nccl_metadata hot
        shard = tensor.numel() // world
        nbytes = shard * tensor.element_size()
        stage = torch.empty(world, shard, dtype=tensor.dtype, device=tensor.device)
        stream = torch.cuda.current_stream().cuda_stream
        kind = cudart.cudaMemcpyKind.cudaMemcpyDeviceToDevice
        for r in range(world):
            src = t.ptrs[r] + t.rank * nbytes
            _check(cudart.cudaMemcpyAsync(stage[r].data_ptr(), src, nbytes, kind, stream))  # expect: copy_engine hot
        out = stage.float().sum(dim=0).to(tensor.dtype).view(out_shape)
        torch.cuda.synchronize()
        dist.barrier()  # expect: nccl_metadata hot
        return out
    except RuntimeError:
        out = torch.empty(out_shape, dtype=tensor.dtype, device=tensor.device)
        dist.reduce_scatter_tensor(out, tensor.contiguous())  # expect: nccl_payload fallback
        return out
