# profile: dtype=float32 world_size=8
import torch
import torch.distributed as dist

NUM_EXPERTS = 32


def solution(x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    experts = gate[:, :NUM_EXPERTS].float().argmax(dim=1)
    dest = experts * world // NUM_EXPERTS
    counts = torch.bincount(dest, minlength=world)
    recv_counts = torch.empty_like(counts)
    dist.all_to_all_single(recv_counts, counts)  # expect: nccl_metadata hot
    order = torch.argsort(dest, stable=True)
    in_splits, out_splits = counts.tolist(), recv_counts.tolist()

    if x.dtype == torch.float32:
        send = x[order].contiguous()
        recv = send.new_empty((sum(out_splits), x.shape[1]))
        dist.all_to_all_single(recv, send, out_splits, in_splits)  # expect: nccl_payload hot
        y = recv * 2.0
    else:
        # half precision: send fp32 scales next to the payload
        scales = x.float().abs().amax(dim=1, keepdim=True).clamp_min(1e-6)
        send = (x.float() / scales)[order].to(x.dtype).contiguous()
        recv = send.new_empty((sum(out_splits), x.shape[1]))
        dist.all_to_all_single(recv, send, out_splits, in_splits)  # expect: nccl_payload fallback
        recv_scales = scales.new_empty((sum(out_splits), 1))
        dist.all_to_all_single(recv_scales, scales[order].contiguous(), out_splits, in_splits)  # expect: nccl_payload fallback
        y = (recv.float() * recv_scales * 2.0).to(x.dtype)

    back = torch.empty((x.shape[0], x.shape[1]), dtype=y.dtype, device=x.device)
    dist.all_to_all_single(back, y, in_splits, out_splits)  # expect: nccl_payload hot
    out = torch.empty_like(back)
    out[order] = back
    load = counts.float()
    dist.all_reduce(load)  # expect: nccl_metadata hot
    return out
