"""A small torch.distributed function for the tracer's tests: a GEMM, an all-reduce, a sum read
back with .item(), and a view."""

import torch
import torch.distributed as dist


def make_inputs(rank, world_size, m=64, n=32, k=16):
    torch.manual_seed(rank)
    return torch.randn(m, k), torch.randn(k, n)


def step(a, b):
    c = a @ b
    dist.all_reduce(c)
    total = c.sum().item()
    return c.view(-1) * total


def crash(a, b):
    raise ValueError("this candidate is broken")


def hang(a, b):
    import time

    while True:
        time.sleep(0.1)


def no_sync(a, b):
    c = a @ b
    dist.all_reduce(c)
    return torch.nn.functional.scaled_dot_product_attention(
        c[None, None], c[None, None], c[None, None])
