"""3D Gaussian splatting, tile exchange: image tiles are owned round-robin by ranks.
Each rank renders partial tiles for its own Gaussians and ships tile t to rank t % W,
which sums the partials. Intranode route: CuPy IPC + peer DMA; NCCL otherwise."""
import torch
import torch.distributed as dist

try:
    import cupy as cp
    _HAS_CUPY = True
except ImportError:
    cp = None
    _HAS_CUPY = False

_TILE = 128
_peer_bufs = {}


def _peer_table(nbytes: int, device: torch.device):
    key = (nbytes, device.index)
    if key in _peer_bufs:
        return _peer_bufs[key]
    world, rank = dist.get_world_size(), dist.get_rank()
    inbox = torch.empty(nbytes * world, dtype=torch.uint8, device=device)
    mine = cp.cuda.runtime.ipcGetMemHandle(inbox.data_ptr())  # expect: rendezvous setup
    gathered = [None] * world
    dist.all_gather_object(gathered, mine)  # expect: nccl_metadata setup
    ptrs = [inbox.data_ptr() if r == rank else cp.cuda.runtime.ipcOpenMemHandle(gathered[r]) for r in range(world)]  # expect: rendezvous setup
    _peer_bufs[key] = (inbox, ptrs)
    return _peer_bufs[key]


def _tiles_by_owner(img: torch.Tensor, world: int) -> torch.Tensor:
    h, w = img.shape
    t = img.reshape(h // _TILE, _TILE, w // _TILE, _TILE).permute(0, 2, 1, 3)
    t = t.reshape(-1, _TILE, _TILE)
    owner = torch.arange(t.shape[0], device=img.device) % world
    return t[torch.argsort(owner, stable=True)].contiguous()


def solution(partial_image: torch.Tensor) -> torch.Tensor:
    world, rank = dist.get_world_size(), dist.get_rank()
    send = _tiles_by_owner(partial_image, world)  # [W * k, TILE, TILE], grouped by owner
    chunk = send.numel() // world
    if not _HAS_CUPY:
        recv = torch.empty_like(send)
        dist.all_to_all_single(recv, send)  # expect: nccl_payload fallback
        return recv.view(world, chunk).float().sum(0).to(send.dtype).view(-1, _TILE, _TILE)
    nbytes = chunk * send.element_size()
    inbox, ptrs = _peer_table(nbytes, send.device)
    stream = torch.cuda.current_stream().cuda_stream
    base = send.data_ptr()
    for off in range(1, world):
        peer = (rank + off) % world
        cp.cuda.runtime.memcpyPeerAsync(ptrs[peer] + rank * nbytes, peer, base + peer * nbytes, rank, nbytes, stream)  # expect: copy_engine hot
    raw = send.view(-1).view(torch.uint8)
    inbox[rank * nbytes:(rank + 1) * nbytes].copy_(raw[rank * nbytes:(rank + 1) * nbytes])
    torch.cuda.current_stream().synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    parts = inbox.view(send.dtype).view(world, chunk).float()
    return parts.sum(0).to(send.dtype).view(-1, _TILE, _TILE)
