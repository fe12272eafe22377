"""Variable-length all-gather: sizes first (literal tensor), then padded payload."""
import torch
import torch.distributed as dist


def solution(x: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    n = x.shape[0]
    local_len = torch.tensor([n], dtype=torch.int64, device=x.device)
    lens = torch.empty(world, dtype=torch.int64, device=x.device)
    dist.all_gather_into_tensor(lens, local_len)  # expect: nccl_metadata hot
    max_len = int(lens.max().item())
    padded = x.new_zeros(max_len, *x.shape[1:])
    padded[:n] = x
    gathered = x.new_empty(world * max_len, *x.shape[1:])
    dist.all_gather_into_tensor(gathered, padded)  # expect: nccl_payload hot
    parts = [gathered[r * max_len:r * max_len + int(lens[r])] for r in range(world)]
    return torch.cat(parts, dim=0)
