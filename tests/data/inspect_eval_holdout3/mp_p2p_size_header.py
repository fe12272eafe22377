import torch
import torch.distributed as dist


def solution(x: torch.Tensor) -> torch.Tensor:
    rank = dist.get_rank()
    world = dist.get_world_size()
    nxt, prv = (rank + 1) % world, (rank - 1) % world

    # forward the rows whose norm exceeds the median: a data-dependent count
    norms = x.float().norm(dim=1)
    keep = x[norms > norms.median()].contiguous()

    # size header first, in a one-element buffer
    hdr_out = torch.tensor([keep.shape[0]], dtype=torch.int64, device=x.device)
    hdr_in = torch.empty(1, dtype=torch.int64, device=x.device)
    if rank % 2 == 0:
        dist.send(hdr_out, dst=nxt)  # expect: nccl_metadata hot
        dist.recv(hdr_in, src=prv)  # expect: nccl_metadata hot
    else:
        dist.recv(hdr_in, src=prv)  # expect: nccl_metadata hot
        dist.send(hdr_out, dst=nxt)  # expect: nccl_metadata hot

    n_in = int(hdr_in.item())
    incoming = torch.empty((n_in, x.shape[1]), dtype=x.dtype, device=x.device)
    reqs = [
        dist.isend(keep, dst=nxt),  # expect: nccl_payload hot
        dist.irecv(incoming, src=prv),  # expect: nccl_payload hot
    ]
    for r in reqs:
        r.wait()
    return torch.cat([x, incoming], dim=0)[: x.shape[0]]
