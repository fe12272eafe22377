"""All-gather over CUDA IPC: each rank publishes a staging buffer and every rank pulls
the peers' shards with cudaMemcpyPeerAsync, so the copy engines do the work."""
import cupy as cp
import torch
import torch.distributed as dist

_ctx = None


class _IpcGather:
    def __init__(self, nbytes: int, device: torch.device):
        self.rank = dist.get_rank()
        self.world = dist.get_world_size()
        self.dev = device.index
        self.nbytes = nbytes
        self.staging = torch.empty(nbytes, dtype=torch.uint8, device=device)
        with cp.cuda.Device(self.dev):
            handle = cp.cuda.runtime.ipcGetMemHandle(self.staging.data_ptr())  # expect: rendezvous setup
        entries = [None] * self.world
        dist.all_gather_object(entries, (self.dev, handle))  # expect: nccl_metadata setup
        self.ptrs, self.devs = [], []
        for r, (d, h) in enumerate(entries):
            self.devs.append(d)
            if r == self.rank:
                self.ptrs.append(self.staging.data_ptr())
            else:
                with cp.cuda.Device(self.dev):
                    self.ptrs.append(cp.cuda.runtime.ipcOpenMemHandle(h))  # expect: rendezvous setup


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    global _ctx
    x = tensor.contiguous()
    nbytes = x.numel() * x.element_size()
    if _ctx is None or _ctx.nbytes != nbytes:
        _ctx = _IpcGather(nbytes, x.device)
    ctx = _ctx

    ctx.staging.copy_(x.view(-1).view(torch.uint8))
    torch.cuda.current_stream().synchronize()
    dist.barrier()  # expect: nccl_metadata hot

    out = torch.empty((ctx.world * x.shape[0], *x.shape[1:]), dtype=x.dtype, device=x.device)
    stream = cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
    rt = cp.cuda.runtime
    for r in range(ctx.world):
        dst = out.data_ptr() + r * nbytes
        if r == ctx.rank:
            rt.memcpyAsync(dst, ctx.staging.data_ptr(), nbytes, rt.memcpyDeviceToDevice, stream.ptr)
        else:
            rt.memcpyPeerAsync(dst, ctx.dev, ctx.ptrs[r], ctx.devs[r], nbytes, stream.ptr)  # expect: copy_engine hot
    stream.synchronize()
    # nobody may overwrite its staging buffer before every peer has pulled it
    dist.barrier()  # expect: nccl_metadata hot
    return out
