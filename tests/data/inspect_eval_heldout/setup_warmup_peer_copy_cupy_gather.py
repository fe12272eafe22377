"""All-gather with cudaMemcpyPeerAsync (CuPy) out of the peers' symmetric buffers.
Peer access is enabled lazily by the driver on the first P2P copy; the context
object does one tiny warm-up copy from every peer so that cost is paid once."""
import cupy as cp
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem


class _GatherCtx:
    def __init__(self, x: torch.Tensor):
        self.buf = symm_mem.empty(x.shape, dtype=x.dtype, device=x.device)  # expect: rendezvous setup
        self.hdl = symm_mem.rendezvous(self.buf, dist.group.WORLD.group_name)  # expect: rendezvous setup
        self.rank, self.world = self.hdl.rank, self.hdl.world_size
        self.dev = x.device.index
        scratch = torch.empty(256, dtype=torch.uint8, device=x.device)
        self.hdl.barrier(channel=0)
        for peer in range(self.world):
            if peer != self.rank:
                cp.cuda.runtime.memcpyPeer(scratch.data_ptr(), self.dev, self.hdl.buffer_ptrs[peer], peer, 256)  # expect: copy_engine setup
        self.hdl.barrier(channel=1)


_CTX = None


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    global _CTX
    x = tensor.contiguous()
    if _CTX is None or _CTX.buf.shape != x.shape:
        _CTX = _GatherCtx(x)
    c = _CTX
    c.buf.copy_(x)
    c.hdl.barrier(channel=0)
    nbytes = x.numel() * x.element_size()
    out = x.new_empty((c.world * x.shape[0], *x.shape[1:]))
    stream = torch.cuda.current_stream().cuda_stream
    out[c.rank * x.shape[0]:(c.rank + 1) * x.shape[0]].copy_(x)
    for i in range(1, c.world):
        peer = (c.rank + i) % c.world
        cp.cuda.runtime.memcpyPeerAsync(out.data_ptr() + peer * nbytes, c.dev,  # expect: copy_engine hot
                                        c.hdl.buffer_ptrs[peer], peer, nbytes, stream)
    c.hdl.barrier(channel=1)
    return out
