import torch
import torch.distributed as dist


def solution(ids: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    dev = ids.device
    rows_per_rank = table.shape[0]
    flat = ids.flatten().float().abs().long() % (rows_per_rank * world)
    owner = flat // rows_per_rank

    lengths = torch.zeros(world, dtype=torch.int32, device=dev)
    for r in range(world):
        lengths[r] = (owner == r).sum()
    recv_lengths = torch.zeros_like(lengths)
    dist.all_to_all_single(recv_lengths, lengths)  # expect: nccl_metadata hot

    order = torch.argsort(owner)
    send_ids = flat[order]
    in_splits = lengths.tolist()
    out_splits = recv_lengths.tolist()
    recv_ids = torch.empty(sum(out_splits), dtype=send_ids.dtype, device=dev)
    dist.all_to_all_single(recv_ids, send_ids, out_splits, in_splits)  # expect: nccl_payload hot

    local_rows = table.index_select(0, recv_ids % rows_per_rank)
    back = torch.empty((send_ids.numel(), table.shape[1]), dtype=table.dtype, device=dev)
    dist.all_to_all_single(back, local_rows, in_splits, out_splits)  # expect: nccl_payload hot

    out = torch.empty_like(back)
    out[order] = back
    return out.view(ids.shape[0], -1, table.shape[1]).sum(dim=1)
