"""All-gather via CUDA IPC. Peer buffers are wrapped as torch tensors through
__cuda_array_interface__ and read with ordinary tensor copies (P2P over NVLink).
Anything going wrong in the IPC path falls back to NCCL."""
import torch
import torch.distributed as dist

try:
    from cuda import cudart
    _HAVE_CUDART = True
except ImportError:
    cudart = None
    _HAVE_CUDART = False

_peers = None


class _DevPtr:
    def __init__(self, ptr: int, numel: int):
        self.__cuda_array_interface__ = {
            "data": (ptr, False), "shape": (numel,), "typestr": "<i2", "strides": None, "version": 3,
        }


def _open_peers(x: torch.Tensor):
    global _peers
    if _peers is None:
        rank, world = dist.get_rank(), dist.get_world_size()
        buf = torch.empty_like(x).view(-1)
        err, h = cudart.cudaIpcGetMemHandle(buf.data_ptr())  # expect: rendezvous setup
        mine = torch.frombuffer(bytearray(bytes(h.reserved)), dtype=torch.uint8).to(x.device)
        table = torch.empty(world, mine.numel(), dtype=torch.uint8, device=x.device)
        dist.all_gather_into_tensor(table, mine)  # expect: nccl_payload setup
        views = []
        for r, row in enumerate(table.cpu()):
            if r == rank:
                views.append(buf)
                continue
            ph = cudart.cudaIpcMemHandle_t()
            ph.reserved = bytes(row.tolist())
            err, ptr = cudart.cudaIpcOpenMemHandle(ph, cudart.cudaIpcMemLazyEnablePeerAccess)  # expect: rendezvous setup
            views.append(torch.as_tensor(_DevPtr(ptr, x.numel()), device=x.device).view(x.dtype))
        _peers = (buf, views)
    return _peers


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    out = torch.empty((world, tensor.numel()), dtype=tensor.dtype, device=tensor.device)
    if not _HAVE_CUDART:
        dist.all_gather_into_tensor(out, tensor.contiguous())  # expect: nccl_payload fallback
        return out.view(world * tensor.shape[0], *tensor.shape[1:])
    try:
        buf, views = _open_peers(tensor)
        buf.copy_(tensor.reshape(-1))
        torch.cuda.synchronize()
        dist.barrier()  # expect: nccl_metadata hot
        for r, peer in enumerate(views):
            out[r].copy_(peer)  # expect: copy_engine hot
        torch.cuda.synchronize()
    except Exception:
        dist.all_gather_into_tensor(out, tensor.contiguous())  # expect: nccl_payload fallback
    finally:
        dist.barrier()  # expect: nccl_metadata hot
    return out.view(world * tensor.shape[0], *tensor.shape[1:])
