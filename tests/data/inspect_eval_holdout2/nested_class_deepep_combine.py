"""DeepEP-style MoE combine: each expert rank writes the outputs for source rank s
straight into s's symmetric receive buffer, then every rank reduces the W expert
contributions of its own tokens with the gate weights."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem


class _Combiner:
    class _Layout:
        def __init__(self, tokens: int, hidden: int, world: int):
            self.tokens, self.hidden, self.world = tokens, hidden, world
            self.slot = tokens // world

        def rows(self, src_rank: int) -> slice:
            return slice(src_rank * self.slot, (src_rank + 1) * self.slot)

    class _Window:
        def __init__(self, shape, dtype, device, group_name: str):
            self.buf = symm_mem.empty(shape, dtype=dtype, device=device)  # expect: rendezvous setup
            self.hdl = symm_mem.rendezvous(self.buf, group_name)  # expect: rendezvous setup

        def peer(self, r: int, shape, dtype) -> torch.Tensor:
            return self.hdl.get_buffer(r, shape, dtype)

    def __init__(self, tokens: int, hidden: int, dtype, device):
        world = dist.get_world_size()
        self.rank = dist.get_rank()
        self.layout = _Combiner._Layout(tokens, hidden, world)
        self.win = _Combiner._Window((tokens, hidden), dtype, device, dist.group.WORLD.group_name)

    def combine(self, expert_out: torch.Tensor) -> torch.Tensor:
        lay, win = self.layout, self.win
        win.hdl.barrier(channel=0)
        for off in range(lay.world):
            dst = (self.rank + off) % lay.world
            remote = win.peer(dst, (lay.tokens, lay.hidden), expert_out.dtype)
            remote[lay.rows(self.rank)].copy_(expert_out[lay.rows(dst)])  # expect: copy_engine hot
        win.hdl.barrier(channel=1)
        return win.buf.view(lay.world, lay.slot, lay.hidden)


_COMBINER = None


def solution(expert_out: torch.Tensor, gate_weights: torch.Tensor) -> torch.Tensor:
    global _COMBINER
    if _COMBINER is None:
        _COMBINER = _Combiner(expert_out.shape[0], expert_out.shape[1], expert_out.dtype, expert_out.device)
    gathered = _COMBINER.combine(expert_out)  # [W, slot, H]
    world, slot = gathered.shape[0], gathered.shape[1]
    w = torch.softmax(gate_weights[:slot, :world].float(), dim=-1)  # [slot, W]
    return torch.einsum("wsh,sw->sh", gathered.float(), w).to(expert_out.dtype)
