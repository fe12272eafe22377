import torch
import torch.distributed as dist

SAMPLES_PER_RANK = 32


def solution(x: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    flat = x.flatten().float()
    dev = flat.device

    # regular samples: a fixed-size buffer filled in place
    local_sorted, _ = torch.sort(flat)
    stride = max(local_sorted.numel() // SAMPLES_PER_RANK, 1)
    samples = torch.empty(SAMPLES_PER_RANK, device=dev)
    samples.copy_(local_sorted[::stride][:SAMPLES_PER_RANK])
    all_samples = torch.empty(world * SAMPLES_PER_RANK, device=dev)
    dist.all_gather_into_tensor(all_samples, samples)  # expect: nccl_metadata hot

    ordered, _ = torch.sort(all_samples)
    splitters = ordered[SAMPLES_PER_RANK::SAMPLES_PER_RANK][: world - 1].contiguous()

    bucket = torch.bucketize(local_sorted, splitters)
    send_counts = torch.bincount(bucket, minlength=world)
    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts)  # expect: nccl_metadata hot

    total = int(recv_counts.sum().item())
    recv_vals = torch.empty(total, device=dev)
    dist.all_to_all_single(  # expect: nccl_payload hot
        recv_vals,
        local_sorted,
        output_split_sizes=recv_counts.tolist(),
        input_split_sizes=send_counts.tolist(),
    )
    merged, _ = torch.sort(recv_vals)

    # each rank reports how many values it ended up with
    sizes = torch.tensor([merged.numel()], dtype=torch.int64, device=dev)
    all_sizes = [torch.empty_like(sizes) for _ in range(world)]
    dist.all_gather(all_sizes, sizes)  # expect: nccl_metadata hot
    pad = max(x.numel() - merged.numel(), 0)
    merged = torch.nn.functional.pad(merged, (0, pad))
    return merged[: x.numel()].view_as(x).to(x.dtype)
