import os

import torch
import torch.distributed as dist


def _ensure_pg():
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl")  # expect: nccl_metadata fallback
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))


def solution(logprobs: torch.Tensor, ref_logprobs: torch.Tensor, rewards: torch.Tensor, beta: float = 0.04) -> torch.Tensor:
    _ensure_pg()
    world = dist.get_world_size()
    # group-relative advantages: rewards normalised over the global batch
    r = rewards.float().mean(dim=1)
    r_all = torch.empty(world * r.numel(), device=r.device)
    dist.all_gather_into_tensor(r_all, r)  # expect: nccl_payload hot
    adv = (r - r_all.mean()) / (r_all.std() + 1e-6)

    kl = torch.exp(ref_logprobs.float() - logprobs.float()) - (ref_logprobs.float() - logprobs.float()) - 1
    per_tok = -(torch.exp(logprobs.float() - logprobs.float().detach()) * adv.unsqueeze(1)) + beta * kl
    loss_sum = per_tok.sum()
    tok = torch.tensor([float(per_tok.numel())], device=per_tok.device)
    both = torch.cat([loss_sum.view(1), tok])
    dist.all_reduce(both)  # expect: nccl_metadata hot
    if beta > 0:
        kl_mean = kl.mean()
        dist.all_reduce(kl_mean)  # expect: nccl_metadata hot
    else:
        kl_mean = torch.zeros((), device=kl.device)
    return (both[0] / both[1] + 0.0 * kl_mean).to(logprobs.dtype)


if __name__ == "__main__":
    dist.init_process_group("nccl")  # expect: nccl_metadata fallback
    x = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
    print(solution(x, x, x))
    dist.barrier()  # expect: nccl_metadata fallback
    dist.destroy_process_group()
