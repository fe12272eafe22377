"""MoE post-all2all un-permute with an overflow guard: when any rank sees an
activation beyond the bf16-safe range, expert outputs are shipped in fp32,
otherwise in bf16. Both pushes go through the copy engine into the source rank's
symmetric inbox."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_BOX = {}
_SAFE = 3.0e4


def _inbox(rows: int, cols: int, device: torch.device):
    if not _BOX:
        world = dist.get_world_size()
        f32 = symm_mem.empty((world, rows, cols), dtype=torch.float32, device=device)  # expect: rendezvous setup
        _BOX["f32"] = f32
        _BOX["hdl"] = symm_mem.rendezvous(f32, dist.group.WORLD.group_name)  # expect: rendezvous setup
    return _BOX["f32"], _BOX["hdl"]


def solution(expert_out: torch.Tensor, perm: torch.Tensor) -> torch.Tensor:
    world, rank = dist.get_world_size(), dist.get_rank()
    rows = expert_out.shape[0] // world
    cols = expert_out.shape[1]
    f32, hdl = _inbox(rows, cols, expert_out.device)
    blocks = expert_out.view(world, rows, cols)
    big = bool((expert_out.float().abs().amax() > _SAFE).item())
    flags = torch.tensor([1.0 if big else 0.0], device=expert_out.device)
    dist.all_reduce(flags, op=dist.ReduceOp.MAX)  # expect: nccl_metadata hot
    wide = flags.item() > 0
    hdl.barrier(channel=0)
    for p in range(world):
        if wide:
            remote = hdl.get_buffer(p, (world, rows, cols), torch.float32)
            remote[rank].copy_(blocks[p].float())  # expect: copy_engine unknown
        else:
            half = hdl.get_buffer(p, (world, rows, 2 * cols), torch.bfloat16)
            half[rank, :, :cols].copy_(blocks[p])  # expect: copy_engine unknown
    hdl.barrier(channel=1)
    if wide:
        gathered = f32.clone()
    else:
        gathered = f32.view(torch.bfloat16).view(world, rows, 2 * cols)[:, :, :cols].float()
    order = torch.argsort(perm[:rows, 0].float())
    return gathered.sum(0)[order].to(expert_out.dtype)
