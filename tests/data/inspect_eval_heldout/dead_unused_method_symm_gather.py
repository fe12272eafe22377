"""All-gather through a small symmetric-memory communicator object. The object was
written to cover reduce-scatter as well; only all_gather is used here."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem


class SymmComm:
    def __init__(self, shape, dtype, device):
        self.shape, self.dtype = tuple(shape), dtype
        self.buf = symm_mem.empty(self.shape, dtype=dtype, device=device)  # expect: rendezvous setup
        self.hdl = symm_mem.rendezvous(self.buf, dist.group.WORLD.group_name)  # expect: rendezvous setup
        self.rank, self.world = self.hdl.rank, self.hdl.world_size

    def all_gather(self, x: torch.Tensor) -> torch.Tensor:
        self.buf.copy_(x)
        self.hdl.barrier(channel=0)
        parts = []
        for i in range(self.world):
            r = (self.rank + i) % self.world
            part = torch.empty_like(x)
            part.copy_(self.hdl.get_buffer(r, self.shape, self.dtype))  # expect: copy_engine hot
            parts.append(part)
        self.hdl.barrier(channel=1)
        order = sorted(range(self.world), key=lambda i: (self.rank + i) % self.world)
        return torch.cat([parts[i] for i in order], dim=0)

    def reduce_scatter(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.shape[0] // self.world
        self.buf.copy_(x)
        self.hdl.barrier(channel=0)
        acc = torch.zeros(rows, *x.shape[1:], dtype=torch.float32, device=x.device)
        tmp = torch.empty(rows, *x.shape[1:], dtype=x.dtype, device=x.device)
        for r in range(self.world):
            tmp.copy_(self.hdl.get_buffer(r, self.shape, self.dtype)[self.rank * rows:(self.rank + 1) * rows])  # expect: copy_engine fallback
            acc += tmp.float()
        self.hdl.barrier(channel=1)
        return acc.to(x.dtype)

    def reduce_scatter_reference(self, x: torch.Tensor) -> torch.Tensor:
        out = x.new_empty((x.shape[0] // self.world, *x.shape[1:]))
        dist.reduce_scatter_tensor(out, x)  # expect: nccl_payload fallback
        return out


_COMM = None


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    global _COMM
    if _COMM is None:
        _COMM = SymmComm(tensor.shape, tensor.dtype, tensor.device)
    return _COMM.all_gather(tensor.contiguous())
