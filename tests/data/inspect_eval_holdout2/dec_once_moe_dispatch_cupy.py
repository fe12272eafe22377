"""DeepEP-style intranode MoE dispatch: every rank pushes the token block routed to
expert rank p straight into p's receive window with peer DMA (CuPy), then fences."""
import functools

import cupy as cp
import torch
import torch.distributed as dist


def _run_once(fn):
    box = {}

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if "value" not in box:
            box["value"] = fn(*args, **kwargs)
        return box["value"]

    return wrapper


@_run_once
def _recv_window(nbytes: int, device: torch.device):
    world = dist.get_world_size()
    rank = dist.get_rank()
    recv = torch.empty(nbytes, dtype=torch.uint8, device=device)
    handle = cp.cuda.runtime.ipcGetMemHandle(recv.data_ptr())  # expect: rendezvous setup
    handles = [None] * world
    dist.all_gather_object(handles, handle)  # expect: nccl_metadata setup
    ptrs = []
    for r in range(world):
        if r == rank:
            ptrs.append(recv.data_ptr())
        else:
            ptrs.append(cp.cuda.runtime.ipcOpenMemHandle(handles[r]))  # expect: rendezvous setup
    return recv, ptrs


def solution(tokens: torch.Tensor, expert_scores: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    rank = dist.get_rank()
    # top-1 routing to an expert rank; sort tokens so each destination is contiguous
    dest = expert_scores.float().argmax(dim=-1) % world
    order = torch.argsort(dest, stable=True)
    send = tokens[order].contiguous()
    counts = torch.bincount(dest, minlength=world)
    recv_counts = torch.empty_like(counts)
    dist.all_to_all_single(recv_counts, counts)  # expect: nccl_metadata hot
    slot_bytes = tokens.numel() * tokens.element_size()
    recv, peer_ptrs = _recv_window(slot_bytes * world, tokens.device)
    row_bytes = tokens.shape[1] * tokens.element_size()
    starts = (torch.cumsum(counts, 0) - counts).tolist()
    counts_h = counts.tolist()
    send_bytes = send.view(-1).view(torch.uint8)
    stream = torch.cuda.current_stream().cuda_stream
    for p in range(world):
        nbytes = counts_h[p] * row_bytes
        src_off = starts[p] * row_bytes
        if p == rank:
            lo = rank * slot_bytes
            recv[lo:lo + nbytes].copy_(send_bytes[src_off:src_off + nbytes])
            continue
        dst = peer_ptrs[p] + rank * slot_bytes
        cp.cuda.runtime.memcpyPeerAsync(dst, p, send.data_ptr() + src_off, rank, nbytes, stream)  # expect: copy_engine hot
    torch.cuda.current_stream().synchronize()
    dist.barrier()  # expect: nccl_metadata hot
    rc = recv_counts.tolist()
    out = []
    for r in range(world):
        rows = recv[r * slot_bytes:r * slot_bytes + rc[r] * row_bytes]
        out.append(rows.view(tokens.dtype).view(-1, tokens.shape[1]))
    return torch.cat(out, dim=0)
