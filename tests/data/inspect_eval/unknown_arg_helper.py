"""Sparse row exchange: only rows flagged by a mask are shipped to the next rank."""
import torch
import torch.distributed as dist


def _send_rows(rows: torch.Tensor, count: int, dst: int, src: int):
    recv_count = torch.tensor([count], device=rows.device)
    dist.send(recv_count, dst=dst)  # expect: nccl_metadata hot
    incoming = torch.tensor([0], dtype=recv_count.dtype, device=rows.device)
    dist.recv(incoming, src=src)  # expect: nccl_metadata hot
    if count > 0:
        dist.send(rows[:count].contiguous(), dst=dst)  # expect: nccl_payload unknown
    n_in = int(incoming.item())
    buf = rows.new_empty(n_in, rows.shape[1])
    if n_in > 0:
        dist.recv(buf, src=src)  # expect: nccl_payload unknown
    return buf


@torch.no_grad()
def solution(x: torch.Tensor) -> torch.Tensor:
    rank, world = dist.get_rank(), dist.get_world_size()
    mask = x.float().abs().amax(dim=1) > 1.0
    selected = x[mask]
    count = int(mask.sum().item())
    dst, src = (rank + 1) % world, (rank - 1) % world
    got = _send_rows(selected, count, dst, src)
    out = x.clone()
    out[: got.shape[0]] += got
    return out
