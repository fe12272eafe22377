"""All-gather + GEMM (sequence-parallel linear). A side stream copies the peers'
A shards out of symmetric memory while the main stream multiplies the shards that
have already arrived."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_HALF_TYPES = (torch.float16, torch.bfloat16)
_ctx = {}


def _context(a: torch.Tensor):
    if not _ctx:
        _ctx["buf"] = symm_mem.empty(a.shape, dtype=a.dtype, device=a.device)  # expect: rendezvous setup
        _ctx["hdl"] = symm_mem.rendezvous(_ctx["buf"], dist.group.WORLD.group_name)  # expect: rendezvous setup
        _ctx["copy_stream"] = torch.cuda.Stream(device=a.device)
    return _ctx["buf"], _ctx["hdl"], _ctx["copy_stream"]


@torch.no_grad()
def solution(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    m = a.shape[0]
    if a.dtype not in _HALF_TYPES:
        full = a.new_empty((world * m, a.shape[1]))
        dist.all_gather_into_tensor(full, a.contiguous())  # expect: nccl_payload fallback
        return full @ b

    buf, hdl, side = _context(a)
    rank = hdl.rank
    buf.copy_(a)
    hdl.barrier(channel=0)
    main = torch.cuda.current_stream()
    side.wait_stream(main)
    gathered = a.new_empty((world, m, a.shape[1]))
    out = a.new_empty((world * m, b.shape[1]))
    events = []
    with torch.cuda.stream(side):
        for step in range(1, world):
            src = (rank + step) % world
            torch.Tensor.copy_(gathered[src], hdl.get_buffer(src, a.shape, a.dtype), non_blocking=True)  # expect: copy_engine hot
            ev = torch.cuda.Event()
            ev.record(side)
            events.append((src, ev))
    torch.matmul(a, b, out=out[rank * m:(rank + 1) * m])
    for src, ev in events:
        main.wait_event(ev)
        torch.matmul(gathered[src], b, out=out[src * m:(src + 1) * m])
    hdl.barrier(channel=1)
    return out
