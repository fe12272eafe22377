import cupy as cp
import numpy as np
import torch
import torch.distributed as dist

_CTX = None


class _Ctx:
    def __init__(self, x: torch.Tensor):
        self.rank = dist.get_rank()
        self.world = dist.get_world_size()
        self.inbox = torch.empty((self.world,) + tuple(x.shape), dtype=x.dtype, device=x.device)
        h = cp.cuda.runtime.ipcGetMemHandle(self.inbox.data_ptr())  # expect: rendezvous setup
        handles = [None] * self.world
        dist.all_gather_object(handles, h)  # expect: nccl_metadata setup
        self.peer_ptrs = []
        for p, hp in enumerate(handles):
            if p == self.rank:
                self.peer_ptrs.append(self.inbox.data_ptr())
            else:
                self.peer_ptrs.append(cp.cuda.runtime.ipcOpenMemHandle(hp))  # expect: rendezvous setup
        self.table = torch.empty(self.world, dtype=torch.int64, device=x.device)
        host = np.asarray(self.peer_ptrs, dtype=np.int64)
        cp.cuda.runtime.memcpy(self.table.data_ptr(), host.ctypes.data, host.nbytes, cp.cuda.runtime.memcpyHostToDevice)


def solution(x: torch.Tensor) -> torch.Tensor:
    global _CTX
    if _CTX is None:
        _CTX = _Ctx(x)
    c = _CTX
    stream = torch.cuda.current_stream().cuda_stream
    dev = x.device.index
    nbytes = x.numel() * x.element_size()
    src = x.contiguous()
    dist.barrier()  # expect: nccl_metadata hot
    for off in range(1, c.world):
        p = (c.rank + off) % c.world
        dst = c.peer_ptrs[p] + c.rank * nbytes
        if off % 2 == 1:
            cp.cuda.runtime.memcpyPeerAsync(dst, p, src.data_ptr(), dev, nbytes, stream)  # expect: copy_engine hot
        else:
            cp.cuda.runtime.memcpyAsync(dst, src.data_ptr(), nbytes, cp.cuda.runtime.memcpyDeviceToDevice, stream)  # expect: copy_engine hot
    own = c.inbox[c.rank]
    cp.cuda.runtime.memcpyAsync(own.data_ptr(), src.data_ptr(), nbytes, cp.cuda.runtime.memcpyDeviceToDevice, stream)
    torch.cuda.current_stream().synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    return c.inbox.sum(dim=0)
