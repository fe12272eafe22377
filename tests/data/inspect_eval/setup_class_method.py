"""Ring all-reduce where each step is a cudaMemcpyPeerAsync into the neighbour's inbox."""
from cuda import cudart
import torch
import torch.distributed as dist


class RingAllReduce:
    def __init__(self, like: torch.Tensor):
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.inbox = torch.empty(like.numel() // self.world, dtype=like.dtype, device=like.device)
        _, h = cudart.cudaIpcGetMemHandle(self.inbox.data_ptr())  # expect: rendezvous setup
        hs = [None] * self.world
        dist.all_gather_object(hs, bytes(h.reserved))  # expect: nccl_metadata setup
        nh = cudart.cudaIpcMemHandle_t()
        nh.reserved = hs[(self.rank + 1) % self.world]
        _, self.next_inbox = cudart.cudaIpcOpenMemHandle(nh, cudart.cudaIpcMemLazyEnablePeerAccess)  # expect: rendezvous setup
        self.next_dev = (like.device.index + 1) % self.world

    def run(self, x):
        w, r = self.world, self.rank
        chunks = x.clone().view(w, -1)
        stream = torch.cuda.current_stream().cuda_stream
        for step in range(2 * (w - 1)):
            send_idx = (r - step) % w
            dist.barrier()  # expect: nccl_metadata hot
            cudart.cudaMemcpyPeerAsync(self.next_inbox, self.next_dev, chunks[send_idx].data_ptr(),  # expect: copy_engine hot
                                       torch.cuda.current_device(), self.inbox.nbytes, stream)
            cudart.cudaStreamSynchronize(stream)
            dist.barrier()  # expect: nccl_metadata hot
            recv_idx = (r - step - 1) % w
            if step < w - 1:
                chunks[recv_idx] += self.inbox
            else:
                chunks[recv_idx].copy_(self.inbox)
        return chunks.view_as(x)


_ring = None


def _get_ring(x):
    global _ring
    if _ring is None:
        _ring = RingAllReduce(x)
    return _ring


def solution(x: torch.Tensor) -> torch.Tensor:
    return _get_ring(x).run(x)
