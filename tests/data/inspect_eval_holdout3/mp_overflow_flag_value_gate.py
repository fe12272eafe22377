import torch
import torch.distributed as dist


def solution(grad: torch.Tensor, master: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    finite_local = bool(torch.isfinite(grad).all())
    flag = torch.tensor(0 if finite_local else 1, dtype=torch.int32, device=grad.device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)  # expect: nccl_metadata hot

    if flag.item() == 0:
        g = grad.float()
        dist.all_reduce(g)  # expect: nccl_payload unknown
        g.div_(world)
        new_master = master.float() - 1e-3 * g
    else:
        skipped = torch.ones(1, device=grad.device)
        dist.all_reduce(skipped)  # expect: nccl_metadata unknown
        new_master = master.float() + 0.0 * skipped

    # loss-scale bookkeeping: a 2-element list of Python floats
    scale_state = torch.tensor([1.0, float(world)], device=grad.device)
    dist.broadcast(scale_state, src=0)  # expect: nccl_metadata hot
    return new_master.to(grad.dtype) * scale_state[0].to(grad.dtype)
