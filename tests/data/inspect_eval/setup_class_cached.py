"""All-gather engine: rendezvous + pointer exchange once, copy-engine pulls every call."""
from cuda.bindings import runtime as cudart
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem


class _AllGatherEngine:
    def __init__(self, numel, dtype, device):
        self.staging = symm_mem.empty(numel, dtype=dtype, device=device)  # expect: rendezvous setup
        self.hdl = symm_mem.rendezvous(self.staging, dist.group.WORLD)  # expect: rendezvous setup
        self.rank = dist.get_rank()
        self.world = dist.get_world_size()
        ptrs = [None] * self.world
        dist.all_gather_object(ptrs, (self.rank, self.hdl.buffer_ptrs[self.rank]))  # expect: nccl_metadata setup
        self.remote = dict(ptrs)
        self.nbytes = numel * self.staging.element_size()

    def __call__(self, x):
        self.staging.copy_(x.view(-1))
        dist.barrier()  # expect: nccl_metadata hot
        out = torch.empty(self.world, x.numel(), dtype=x.dtype, device=x.device)
        stream = torch.cuda.current_stream().cuda_stream
        for r in range(self.world):
            cudart.cudaMemcpyAsync(out[r].data_ptr(), self.remote[r], self.nbytes,  # expect: copy_engine hot
                                   cudart.cudaMemcpyKind.cudaMemcpyDeviceToDevice, stream)
        cudart.cudaStreamSynchronize(stream)
        dist.barrier()  # expect: nccl_metadata hot
        return out.view(-1, *x.shape[1:])


_ENGINE = None


def solution(x: torch.Tensor) -> torch.Tensor:
    global _ENGINE
    if _ENGINE is None:
        _ENGINE = _AllGatherEngine(x.numel(), x.dtype, x.device)
    return _ENGINE(x)
