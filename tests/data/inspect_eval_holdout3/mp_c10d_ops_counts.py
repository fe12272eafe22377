import torch
import torch.distributed as dist

_C10D = torch.ops._c10d_functional


def solution(tokens: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    gname = dist.group.WORLD.group_name
    dest = gate.float().argmax(dim=1) % world
    counts = torch.bincount(dest, minlength=world).to(torch.int64)
    ones = [1] * world
    recv_counts = _C10D.all_to_all_single(counts, ones, ones, gname)  # expect: nccl_metadata hot
    recv_counts = _C10D.wait_tensor(recv_counts)

    order = torch.argsort(dest, stable=True)
    send = tokens[order].contiguous()
    out_split = recv_counts.tolist()
    in_split = counts.tolist()
    recv = _C10D.all_to_all_single(send, out_split, in_split, gname)  # expect: nccl_payload hot
    recv = _C10D.wait_tensor(recv)

    y = recv.float().relu().to(tokens.dtype)
    back = _C10D.all_to_all_single(y, in_split, out_split, gname)  # expect: nccl_payload hot
    back = _C10D.wait_tensor(back)
    out = torch.empty_like(tokens)
    out[order] = back

    load = _C10D.all_reduce(counts.float(), "sum", gname)  # expect: nccl_metadata hot
    load = _C10D.wait_tensor(load)
    return out * (load.max() / load.mean().clamp_min(1.0)).to(out.dtype)
