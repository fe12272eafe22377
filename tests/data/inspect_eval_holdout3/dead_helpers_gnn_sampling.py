import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

FANOUT = 8


def _sample_neighbors(adj: torch.Tensor, fanout: int) -> torch.Tensor:
    scores = adj.float() + torch.rand_like(adj, dtype=torch.float32)
    return scores.topk(fanout, dim=1).indices


def _exchange_counts_old(idx: torch.Tensor, world: int) -> torch.Tensor:
    # kept from an earlier version; solution() no longer calls it
    counts = torch.bincount(idx.flatten() % world, minlength=world)
    recv = torch.empty_like(counts)
    dist.all_to_all_single(recv, counts)  # expect: nccl_metadata fallback
    return recv


def _pull_features_symm(feat: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    # experimental copy-engine pull, never wired in
    buf = symm_mem.empty(feat.shape, dtype=feat.dtype, device=feat.device)  # expect: rendezvous fallback
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD.group_name)  # expect: rendezvous fallback
    buf.copy_(feat)
    hdl.barrier()
    peer = (dist.get_rank() + 1) % dist.get_world_size()
    out = torch.empty_like(feat)
    out.copy_(hdl.get_buffer(peer, tuple(feat.shape), feat.dtype))  # expect: copy_engine fallback
    return out[idx[:, 0] % feat.shape[0]]


class _Aggregator:
    def __init__(self, dim: int):
        self.dim = dim

    def reduce_remote(self, h: torch.Tensor) -> torch.Tensor:
        dist.all_reduce(h)  # expect: nccl_payload fallback
        return h


def solution(features: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    nbr = _sample_neighbors(adj, FANOUT)
    agg = _Aggregator(features.shape[1])
    # full-graph features on every rank: gather the shards
    shards = torch.empty((world * features.shape[0], features.shape[1]), dtype=features.dtype, device=features.device)
    dist.all_gather_into_tensor(shards, features)  # expect: nccl_payload hot
    gathered = shards[nbr.flatten() % shards.shape[0]].view(features.shape[0], FANOUT, -1)
    h = gathered.float().mean(dim=1)
    del agg
    return h.to(features.dtype)
