"""Ulysses sequence-parallel self-attention (forward), end to end.

Input x: [S/W, H] sequence shard. QKV projection -> all-to-all (gather sequence,
scatter heads) -> SDPA over the full sequence -> all-to-all back (gather heads,
scatter sequence) -> output projection.
"""
import contextlib
from dataclasses import dataclass
from typing import Optional

import torch
import torch.distributed as dist
import torch.nn.functional as F

@dataclass(frozen=True)
class _Cfg:
    num_heads: int = 16
    causal: bool = True
    comm_fp32: bool = False

class _SeqAllToAll:
    """Both layout changes of Ulysses, over one process group."""

    def __init__(self, group: Optional[dist.ProcessGroup]):
        self.group = group
        self.world = dist.get_world_size(group)

    def _a2a(self, t: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(t)
        if t.dtype == torch.float32:
            dist.all_to_all_single(out, t, group=self.group)  # expect: nccl_payload fallback
        else:
            dist.all_to_all_single(out, t.contiguous(), group=self.group)  # expect: nccl_payload hot
        return out

    def seq_to_head(self, t: torch.Tensor) -> torch.Tensor:
        s, h, d = t.shape  # [s, heads, d] -> [S, heads / W, d]
        send = t.reshape(s, self.world, h // self.world, d).transpose(0, 1).contiguous()
        recv = self._a2a(send)
        return recv.reshape(self.world * s, h // self.world, d)

    def head_to_seq(self, t: torch.Tensor) -> torch.Tensor:
        S, hl, d = t.shape  # [S, heads / W, d] -> [s, heads, d]
        s = S // self.world
        recv = self._a2a(t.reshape(self.world, s, hl, d).contiguous())
        return recv.permute(1, 0, 2, 3).reshape(s, self.world * hl, d)

@contextlib.contextmanager
def _maybe_sync(enabled: bool):
    yield
    if enabled:
        torch.cuda.synchronize()
        dist.barrier()  # expect: nccl_metadata fallback

_CFG = _Cfg()
_COMM = {}

def _comm(group) -> _SeqAllToAll:
    key = id(group)
    if key not in _COMM:
        _COMM[key] = _SeqAllToAll(group)
    return _COMM[key]

def solution(
    x: torch.Tensor,
    w_qkv: torch.Tensor,
    w_o: torch.Tensor,
    group: Optional[dist.ProcessGroup] = None,
    sync: bool = False,
) -> torch.Tensor:
    cfg = _CFG
    comm = _comm(group)
    s, hidden = x.shape
    nh = cfg.num_heads
    hd = hidden // nh
    if nh % comm.world:
        raise ValueError("num_heads must be divisible by the SP degree")
    # w_qkv is [H, H]; rolled copies stand in for the q, k and v slices of a [3H, H] weight
    q = (x @ w_qkv.t()).view(s, nh, hd)
    k = (x @ w_qkv.roll(1, 0).t()).view(s, nh, hd)
    v = (x @ w_qkv.roll(2, 0).t()).view(s, nh, hd)
    if cfg.comm_fp32:
        q, k, v = q.float(), k.float(), v.float()
    with _maybe_sync(sync):
        qf, kf, vf = [comm.seq_to_head(t) for t in (q, k, v)]
        attn = F.scaled_dot_product_attention(
            qf.transpose(0, 1), kf.transpose(0, 1), vf.transpose(0, 1), is_causal=cfg.causal
        ).transpose(0, 1)
        o = comm.head_to_seq(attn.to(x.dtype).contiguous())
    return (o.reshape(s, hidden) @ w_o.t()).to(x.dtype)

if __name__ == "__main__":
    dist.init_process_group("nccl")  # expect: nccl_metadata fallback
    torch.cuda.set_device(dist.get_rank() % torch.cuda.device_count())
    xs = torch.randn(128, 1024, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16) / 32
    print(solution(xs, w, w).shape)
    dist.barrier()  # expect: nccl_metadata fallback
    dist.destroy_process_group()
