import torch
import torch.distributed as dist

_comm = None


def solution(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    global _comm
    if _comm is None:
        _comm = torch.cuda.Stream()
    outs = []
    for part in x.chunk(4):
        y = part @ w
        _comm.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(_comm):
            dist.all_reduce(y, async_op=True)
        outs.append(y)
    return torch.cat(outs)
