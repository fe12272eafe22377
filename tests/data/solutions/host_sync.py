import torch

_warm = None


def solution(x: torch.Tensor) -> torch.Tensor:
    global _warm
    if _warm is None:
        torch.cuda.synchronize()  # once: not on the hot path
        _warm = True
    n = int(x.sum().item())
    counts = x.shape[0] and x[:4].tolist()
    torch.cuda.current_stream().synchronize()
    return x[:n] if counts else x
