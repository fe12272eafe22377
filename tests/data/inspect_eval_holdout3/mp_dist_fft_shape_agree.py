import torch
import torch.distributed as dist


def _transpose(a: torch.Tensor, world: int) -> torch.Tensor:
    rows, cols = a.shape
    send = a.reshape(rows, world, cols // world).transpose(0, 1).contiguous()
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)  # expect: nccl_payload hot
    return recv.reshape(world * rows, cols // world)


def solution(x: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    # every rank must hold the same slab shape
    shape = torch.tensor([x.shape[0], x.shape[1]], device=x.device)
    lo = shape.clone()
    dist.all_reduce(shape, op=dist.ReduceOp.MAX)  # expect: nccl_metadata hot
    dist.all_reduce(lo, op=dist.ReduceOp.MIN)  # expect: nccl_metadata hot
    if not torch.equal(shape, lo):
        raise RuntimeError("uneven slabs")

    c = torch.fft.fft(x.float(), dim=1)
    re_im = torch.view_as_real(c).reshape(x.shape[0], -1)
    t = _transpose(re_im, world)
    c2 = torch.view_as_complex(t.reshape(t.shape[0], -1, 2).contiguous())
    c2 = torch.fft.fft(c2, dim=0)
    back = _transpose(torch.view_as_real(c2).reshape(c2.shape[0], -1), world)
    spec = back.reshape(x.shape[0], -1, 2)
    power = spec.pow(2).sum(-1)

    energy = power.sum()
    dist.all_reduce(energy)  # expect: nccl_metadata hot
    return (power / energy).to(x.dtype)
